"""Load (issue 9): 200 signed-in websocket clients and 50 API requests/s while 5,000
watch events/s are ingested, on loopback, for a bounded time: no errors, every client
connected and kept receiving updates, every event stored. The p99 latencies are reported
(tests/artifacts/load.json and docs/benchmarks.md), not asserted: speed is benchmarked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .loadrun import load

pytestmark = pytest.mark.slow
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def test_two_hundred_websockets_and_fifty_api_calls_a_second_while_ingesting(
    tmp_path: Path,
) -> None:
    result = load(tmp_path, clients=200, api_rps=50, rate=5000, seconds=10)
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "load.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    assert result["error_count"] == 0, result["errors"]
    assert result["connected"] == 200
    assert result["pods_stored"] == result["fed_events"]
    assert result["frames_per_client"]["min"] >= 1
    assert result["api"]["n"] >= 0.9 * 50 * 10
