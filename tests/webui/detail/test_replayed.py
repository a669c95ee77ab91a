"""The replay's fleet and nodes pages made without a row per pod (``replayed``) equal
``fleet_digest`` and ``nodes_digest`` over every pod's row, at any time."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from handoff.core.trace import TraceReader
from handoff.live.pages.fleet import SWIMLANE_LIMIT, fleet_digest
from handoff.live.pages.nodes import nodes_digest
from handoff.offline.replay import ReplayState
from tests.offline.test_replay_checkpoints import every_trace, turning_times
from tests.webui.detail.tracedata import many_pods_trace
from webui.detail.replayed import fleet_at, nodes_at
from webui.detail.sources import ReplaySource


def same_pages(state: ReplayState, at: float, stuck_after: float) -> None:
    for limit in (SWIMLANE_LIMIT, 3, 0):
        with ReplaySource(state, at, stuck_after) as source:
            want = fleet_digest(source.rows(), source.evaluated_at, limit)
        with ReplaySource(state, at, stuck_after) as source:
            assert fleet_at(source, limit) == want, (at, limit)
    with ReplaySource(state, at, stuck_after) as source:
        want = nodes_digest(source.rows(), source.nodes(), source.evaluated_at)
    with ReplaySource(state, at, stuck_after) as source:
        assert nodes_at(source) == want, at


def picks(state: ReplayState, turning: list[float], rng: random.Random) -> list[float]:
    times = state.times
    chosen = [
        times[0] - 1.0,
        times[0],
        *(times[c.position] for c in state.checkpoints[1:]),
        *(times[c.position - 1] for c in state.checkpoints[1:]),
        *rng.sample(times, min(30, len(times))),
        *(rng.uniform(times[0], times[-1]) for _ in range(20)),
        *rng.sample(turning, min(40, len(turning))),
        times[-1],
        times[-1] + 3600.0,
    ]
    rng.shuffle(chosen)  # forwards, backwards, within a slot and across
    return chosen


@pytest.mark.parametrize("every", [7, 40])
def test_every_situation_at_many_times(every: int) -> None:
    """The seed situations (PodGC, node lost, rejected, evicted, stuck, loops...)."""
    events = every_trace()
    state = ReplayState(events, every=every, stuck_after=60.0)
    rng = random.Random(every)
    for at in picks(state, turning_times(events, 60.0), rng):
        same_pages(state, at, 60.0)
    for at in rng.sample(state.times, 5):  # another threshold: every pod judged anew
        same_pages(state, at, 30.0)


def test_many_pods_with_open_bars_and_ties(tmp_path: Path) -> None:
    """Hundreds of pods, steady between checkpoints, whose creation times share their
    second (ties in the swimlane's order), with running bars open at the time asked."""
    path = many_pods_trace(tmp_path / "many.jsonl", 400)
    events = list(TraceReader(path))
    state = ReplayState(events, every=150, stuck_after=2.0)
    rng = random.Random(3)
    for at in picks(state, turning_times(events, 2.0), rng):
        same_pages(state, at, 2.0)
    # Asked twice at one time, and after other times: what is kept by pod stays right.
    for at in rng.sample(state.times, 10) * 2:
        same_pages(state, at, 2.0)
