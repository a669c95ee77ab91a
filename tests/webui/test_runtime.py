"""A web process freezes its loaded application out of the garbage collector and raises
the young threshold (webui/runtime.py), as HANDOFF_WEB_GC_THRESHOLD says; 0 leaves
Python's collector as it is. Checked in a fresh interpreter that loads the ASGI
application as Daphne does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    "import gc, sys, handoff.asgi; "
    "print(gc.get_threshold()[0], gc.get_freeze_count(), sys.getswitchinterval())"
)


def _probe(**settings: str) -> tuple[int, int, float]:
    """The young threshold, the frozen count and the switch interval of a fresh process
    that loaded the application with these settings (the others their defaults)."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "handoff.settings"}
    for name in ("HANDOFF_WEB_GC_THRESHOLD", "HANDOFF_WEB_SWITCH_INTERVAL_US"):
        env.pop(name, None)
    env.update(settings)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
        check=True, timeout=120,
    ).stdout  # fmt: skip
    young, frozen, switch = out.split()[-3:]
    return int(young), int(frozen), float(switch)


def _loaded(threshold: str | None) -> tuple[int, int]:
    young, frozen, _ = _probe(
        **({} if threshold is None else {"HANDOFF_WEB_GC_THRESHOLD": threshold})
    )
    return young, frozen


@pytest.mark.parametrize(("setting", "young"), [(None, 10_000), ("20000", 20_000)])
def test_the_web_process_freezes_its_application_and_raises_the_threshold(setting, young):
    threshold, frozen = _loaded(setting)
    assert threshold == young
    assert frozen > 10_000  # Django, the modules, the URLconf: the loaded application


def test_zero_leaves_pythons_collector_alone():
    assert _loaded("0") == (700, 0)


def test_the_web_process_switches_threads_every_half_millisecond_unless_told_otherwise():
    assert _probe()[2] == 0.0005
    assert _probe(HANDOFF_WEB_SWITCH_INTERVAL_US="2000")[2] == 0.002
    assert _probe(HANDOFF_WEB_SWITCH_INTERVAL_US="0")[2] == 0.005  # Python's own
