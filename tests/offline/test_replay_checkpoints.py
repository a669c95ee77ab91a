"""A replay's seek (thawed checkpoints) and its judging pass (steady pods judged once per
checkpoint) give exactly what a fresh fold to the same time and ``report.judged`` give."""

from __future__ import annotations

import random
from pathlib import Path

import msgspec
import orjson
import pytest

from handoff.core.report import build_report, judged
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader, WatchEvent
from handoff.offline.replay import ReplayState

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
STUCK_AFTER = 60.0


def copies(name: str, count: int) -> list[WatchEvent]:
    """The trace ``count`` times over, each copy's pods with their own uids and names (the
    same owners): a workload whose pods keep ending the same way, a loop."""
    lines = (TRACES / name).read_bytes().splitlines()
    pods = {}
    for raw in lines:
        obj = orjson.loads(raw).get("object") or {}
        if obj.get("kind") == "Pod":
            meta = obj["metadata"]
            pods[meta["uid"]] = meta["name"]
    out: list[WatchEvent] = []
    for index in range(count):
        text = b"\n".join(lines).decode()
        for uid, pod in pods.items():
            text = text.replace(uid, f"{uid[:-4]}c{index:03d}").replace(pod, f"{pod}-c{index}")
        path_events = [orjson.loads(line) for line in text.splitlines()]
        out.extend(_events(path_events))
    return out


def _events(records: list[dict]) -> list[WatchEvent]:
    return list(TraceReader([orjson.dumps(r) for r in records if "handoff_trace" not in r]))


def every_trace() -> list[WatchEvent]:
    events = [e for path in sorted(TRACES.glob("*.jsonl")) for e in TraceReader(path)]
    return events + copies("podgc-new-style.jsonl", 4) + copies("stuck-terminating.jsonl", 3)


def turning_times(events: list[WatchEvent], stuck_after: float) -> list[float]:
    """Times next to where verdicts change with time alone: a binding ``stuck_after`` old,
    a deletion's grace plus ``stuck_after``, a node going down."""
    timeline = fold(events)
    points = []
    for pod in timeline.pods.values():
        points.extend(timeline.turning_points(pod, stuck_after))
    return [p + d for p in points for d in (-0.01, -1e-4, 0.0, 1e-4, 0.01)]


def same_judging(state: ReplayState, at: float, stuck_after: float) -> None:
    """Seek and judging at ``at`` equal a fresh fold of the trace's events (in observed
    order: traces put together here share node names, whose events must not reorder)."""
    events = state.events
    with state.seek(at) as timeline:
        head, ranked = state.judged_at(at, stuck_after)
        report = build_report(timeline, at=at, stuck_after=stuck_after)
    fresh = fold(events, until=at)
    want_head, want_ranked = judged(fresh, at, stuck_after)
    assert head == want_head, at
    assert [(*i[:5], i[6]) for i in ranked] == [(*i[:5], i[6]) for i in want_ranked], at
    assert [i[5] for i in ranked] == [i[5] for i in want_ranked], at
    assert report == build_report(fresh, at=at, stuck_after=stuck_after), at


def frozen(state: ReplayState) -> list[bytes]:
    encode = msgspec.msgpack.encode
    return [
        encode((list(c.pods.values()), list(c.nodes.values()), c.owners.data(), c.by_name))
        for c in state.checkpoints
    ]


@pytest.mark.parametrize("every", [1, 7, 40])
def test_seek_and_judging_equal_a_fresh_fold_at_many_times(every: int) -> None:
    events = every_trace()
    state = ReplayState(events, every=every, stuck_after=STUCK_AFTER)
    assert len(state.checkpoints) > 3
    before = frozen(state)
    times = state.times
    rng = random.Random(19)
    on_checkpoints = [times[c.position] for c in state.checkpoints[1:]]
    just_before = [times[c.position - 1] for c in state.checkpoints[1:]]
    picks = [
        times[0] - 1.0,  # before the first event (and the first checkpoint)
        times[0],
        *on_checkpoints,
        *just_before,
        *rng.sample(times, 40),
        *(rng.uniform(times[0], times[-1]) for _ in range(40)),
        *rng.sample(turning_times(events, STUCK_AFTER), 60),
        times[-1],  # the end
        times[-1] + 3600.0,  # long after it: stuck-after thresholds all passed
    ]
    rng.shuffle(picks)  # forwards, backwards, within one slot and across
    for at in picks:
        same_judging(state, at, STUCK_AFTER)
    for at in rng.sample(picks, 15):  # another threshold: every pod judged
        same_judging(state, at, 30.0)
    assert frozen(state) == before  # no seek or judging changed a checkpoint


def test_many_pods_steady_between_checkpoints(tmp_path: Path) -> None:
    from tests.webui.detail.tracedata import many_pods_trace

    path = many_pods_trace(tmp_path / "many.jsonl", 400)
    events = list(TraceReader(path))
    state = ReplayState(events, every=150, stuck_after=2.0)
    steady = sum(len(s.items) for s in state.steady)
    assert steady > len(state.steady) * 100  # most pods were judged once per checkpoint
    rng = random.Random(3)
    for at in [*rng.sample(state.times, 25), *rng.sample(turning_times(events, 2.0), 25)]:
        same_judging(state, at, 2.0)


@pytest.mark.parametrize("every", [7, 40])
def test_steady_came_and_left_are_the_difference_of_the_items(every: int) -> None:
    """``Steady.came``/``left``: each checkpoint's steady items are the one before's
    without ``left`` and with ``came`` (by identity), what a page carrying aggregates of
    the steady pods from checkpoint to checkpoint relies on."""
    state = ReplayState(every_trace(), every=every, stuck_after=STUCK_AFTER)
    before: dict[int, tuple] = {}
    moved = 0
    for steady in state.steady:
        now = {id(item): item for item in steady.items}
        assert {id(item) for item in steady.left} == before.keys() - now.keys()
        assert {id(item) for item in steady.came} == now.keys() - before.keys()
        assert len(set(map(id, steady.left))) == len(steady.left)  # none twice
        assert len(set(map(id, steady.came))) == len(steady.came)
        moved += len(steady.left) + len(steady.came)
        before = now
    assert moved
