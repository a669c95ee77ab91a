"""Fixtures shared by the ingestion tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.sim import Options, find_scenario
from handoff.sim.runner import serve
from handoff.sim.serve.server import SimServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[SimServer, Path]]:
    """`manual-scheduling` served in-process at 20x, recorded to ``sim.jsonl``: the
    recording is what the watchers must end up agreeing with."""
    recording = tmp_path / "sim.jsonl"
    options = Options(seed=3, duration=180, start=float(int(time.time())))
    server, rec, writer = serve(
        find_scenario("manual-scheduling", None),
        options,
        "127.0.0.1:0",
        speed=20,
        record=recording,
    )
    yield server, recording
    server.stop()
    with server.lock:
        rec.drain()
        writer.close()
