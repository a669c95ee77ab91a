"""Properties the fold must keep on every scripted trace: redelivery changes
nothing, and the race between the Pod, Event and Node watches changes no verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import read_all

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").glob("*.jsonl"))
PROPERTY_SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _events(path):
    events, reader = read_all(path)
    assert not reader.errors
    return events


def _state(events):
    report = build_report(fold(events))
    return report["pods"], report["summary"]


def _verdicts(events):
    report = build_report(fold(events))
    return {
        (p["uid"], p["name"]): (p["verdict"], p["reason"], p["binding"]) for p in report["pods"]
    }


def test_there_are_scripted_traces_to_check():
    assert len(TRACES) >= 15


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
@PROPERTY_SETTINGS
@given(data=st.data())
def test_duplicating_any_event_changes_nothing(path, data):
    events = _events(path)
    state = [e for e in events if e.type not in ("BOOKMARK", "ERROR")]
    original = data.draw(st.integers(0, len(state) - 1), label="duplicated")
    copy = state[original]
    position = data.draw(st.integers(events.index(copy) + 1, len(events)), label="reinserted at")
    redelivered = [*events[:position], copy, *events[position:]]

    assert _state(redelivered) == _state(events)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_a_relist_of_everything_changes_nothing(path):
    events = _events(path)
    relist = [e for e in events if e.type in ("ADDED", "MODIFIED")]

    assert _state(events + relist) == _state(events)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
@PROPERTY_SETTINGS
@given(rng=st.randoms(use_true_random=False))
def test_interleaving_of_the_watches_does_not_change_verdicts(path, rng):
    events = _events(path)
    streams: dict[str, list] = {}
    for event in events:
        streams.setdefault(event.object.kind, []).append(event)
    queues = [list(stream) for stream in streams.values()]
    merged = []
    while any(queues):
        queue = rng.choice([q for q in queues if q])
        merged.append(queue.pop(0))

    assert _verdicts(merged) == _verdicts(events)
