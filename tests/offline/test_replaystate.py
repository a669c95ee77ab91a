"""ReplayState: folding to a time through checkpoints gives what a full fold gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader
from handoff.offline.replay import MAX_CHECKPOINTS, EmptyTrace, ReplayState

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def report_at(timeline, at: float) -> dict:
    report = build_report(timeline, at=at)
    report.pop("cluster")
    return report


@pytest.mark.parametrize(
    "name", ["stuck-node-missing.jsonl", "rejected-outofcpu.jsonl", "node-lost.jsonl"]
)
def test_it_folds_to_any_time_like_a_full_fold(name: str) -> None:
    events = list(TraceReader(TRACES / name))
    state = ReplayState(events, every=3)
    times = sorted({e.time() for e in events})
    # Forwards, backwards and jumping about: the working timeline is reused or reloaded.
    picks = [*times[:: max(1, len(times) // 7)], times[-1], times[0], times[len(times) // 2]]
    for at in picks:
        expected = report_at(fold(events, until=at), at)
        assert report_at(state.timeline_at(at), at) == expected, at


def test_it_reads_a_trace_file_with_its_cluster_and_range() -> None:
    state = ReplayState.from_file(TRACES / "rejected-outofcpu.jsonl")
    assert state.cluster == "kind-manual"
    assert state.start < state.end
    assert state.count_until(state.start - 1) == 0
    assert state.count_until(state.end) == len(state.events)


def test_it_refuses_a_file_without_events(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b'{"handoff_trace":1}\nnot json\n')
    with pytest.raises(EmptyTrace):
        ReplayState.from_file(path)


def test_it_keeps_at_most_the_checkpoint_cap() -> None:
    events = list(TraceReader(TRACES / "scheduled-running.jsonl")) * 40
    assert len(events) > 2 * MAX_CHECKPOINTS
    state = ReplayState(events, every=1)
    assert len(state.checkpoints) <= MAX_CHECKPOINTS
    assert state.timeline_at(state.end).events_applied == len(events)


def test_one_judging_pass_serves_every_request_at_one_time(monkeypatch) -> None:
    from handoff.offline.judging import SteadyJudging

    events = [
        e
        for name in ("node-lost.jsonl", "stuck-node-missing.jsonl")
        for e in TraceReader(TRACES / name)
    ]
    state = ReplayState(events, every=3)
    passes = []
    real = SteadyJudging.judged
    monkeypatch.setattr(
        SteadyJudging, "judged", lambda self, *a: passes.append(a[3]) or real(self, *a)
    )
    times = sorted({e.time() for e in events})
    early, late = times[len(times) // 3], times[-1]
    for at in (early, early, late, late, early):
        with state.seek(at):
            head, ranked = state.judged_at(at, 60.0)
            expected = build_report(fold(events, until=at), at=at)
            assert head["summary"] == expected["summary"]
            assert [item[4] for item in ranked] == [p["uid"] for p in expected["pods"]]
    assert passes == [early, late, early]  # again only once the timeline moved


def test_the_delta_alone_leaves_the_ranking_unmade_until_asked(monkeypatch) -> None:
    """``judged_delta`` (the fleet page's) does not rank every pod; ``judged_at`` at the
    same time then ranks them once, as ``report.judged`` does, and keeps the ranking."""
    from handoff.offline import judging

    events = list(TraceReader(TRACES / "scheduled-running.jsonl")) + list(
        TraceReader(TRACES / "node-lost.jsonl")
    )
    state = ReplayState(events, every=3)
    rankings = []
    real = judging._ranked
    monkeypatch.setattr(judging, "_ranked", lambda *a: rankings.append(1) or real(*a))
    times = sorted({e.time() for e in events})
    steady = 0
    for at in times[len(times) // 2 :]:
        with state.seek(at):
            made = len(rankings)
            steady += state.judged_delta(at, 60.0) is not None
            assert len(rankings) == made  # the delta alone: no ranking
            expected = build_report(fold(events, until=at), at=at)
            for _ in range(2):
                head, ranked = state.judged_at(at, 60.0)
                assert head["summary"] == expected["summary"]
                assert [item[4] for item in ranked] == [p["uid"] for p in expected["pods"]]
            assert len(rankings) <= made + 1  # made once for both asks
            assert state.judged_delta(at, 60.0) is state.judged_delta(at, 60.0)
    assert steady  # the shortcut's lazy ranking was taken, not only the full pass
    assert rankings


def test_a_seek_copies_only_the_pods_it_folds_and_never_changes_a_checkpoint() -> None:
    """A seek shares with its checkpoint every pod the events up to the time asked do
    not touch (copied only before the first event touching it, moving forward too),
    while the checkpoints stay as they were frozen."""
    from handoff.offline.checkpoints import _encode

    events = list(TraceReader(TRACES / "scheduled-running.jsonl")) + list(
        TraceReader(TRACES / "node-lost.jsonl")
    )
    state = ReplayState(events, every=5)
    frozen = [{uid: _encode(p) for uid, p in c.pods.items()} for c in state.checkpoints]
    times = state.times
    shared = 0
    for at in [*times[::2], *reversed(times[1::3]), times[-1], times[0]]:
        timeline = state.timeline_at(at)
        target = state.count_until(at)
        checkpoint = state.checkpoints[state._slot]
        touched_by_now = {
            uid
            for uid, first in zip(checkpoint.first_touched, checkpoint.first_touch_at, strict=True)
            if first < target
        }
        for uid, pod in timeline.pods.items():
            if pod is checkpoint.pods.get(uid):
                assert uid not in touched_by_now, (at, uid)  # folded into: a copy
                shared += uid in checkpoint.touched  # touched later in the slot
        assert report_at(timeline, at) == report_at(fold(events, until=at), at)
    assert shared  # pods of the slot's events not yet reached were not copied
    assert frozen == [{uid: _encode(p) for uid, p in c.pods.items()} for c in state.checkpoints]
