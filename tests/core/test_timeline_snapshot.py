"""A timeline saved and restored (the fold worker's snapshot) is the same timeline."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from handoff.core.report import build_report
from handoff.core.snapshot import dump_state, load_state
from handoff.core.timeline import fold
from handoff.core.trace import read_all

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").glob("*.jsonl"))


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_a_restored_timeline_folds_on_as_if_never_saved(path):
    events, _ = read_all(path)
    half = len(events) // 2
    whole = fold(events)
    restored = load_state(dump_state(fold(events[:half])))
    for event in events[half:]:
        restored.apply(event)

    assert build_report(restored) == build_report(whole)


def test_it_restores_event_keys_that_do_not_depend_on_the_process():
    events, _ = read_all(TRACES[0])
    restored = load_state(dump_state(fold(events)))
    for event in events:  # every repeat must be recognised, not added again
        restored.apply(event)

    assert build_report(restored) == build_report(fold(events))


@pytest.mark.parametrize(
    "blob",
    [b"", b"garbage", pickle.dumps({"version": 1}), b"\x81\xa7version\x02"],
    ids=["empty", "garbage", "pickle", "other-version"],
)
def test_it_refuses_anything_but_its_own_data(blob):
    with pytest.raises(ValueError, match="snapshot"):
        load_state(blob)
