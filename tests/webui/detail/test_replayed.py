"""The replay's fleet and nodes pages made without a row per pod (``replayed``) equal
``fleet_digest`` and ``nodes_digest`` over every pod's row, at any time."""

from __future__ import annotations

import gc
import random
from collections import Counter
from pathlib import Path

import orjson
import pytest

from handoff.core.trace import TraceReader
from handoff.live.pages.fleet import SWIMLANE_LIMIT, fleet_digest, swimlane_bars
from handoff.live.pages.nodes import nodes_digest
from handoff.offline.replay import ReplayState
from tests.offline.test_replay_checkpoints import every_trace, turning_times
from tests.webui.detail.tracedata import TRACES, many_pods_trace
from webui.detail import replayed
from webui.detail.replayed import fleet_at, fleet_json, known, nodes_at
from webui.detail.sources import ReplaySource
from webui.detail.steadyfleet import LATENCY_PLACES
from webui.jsonbody import encode


def same_pages(state: ReplayState, at: float, stuck_after: float) -> bool:
    """The pages equal the digests at ``at``; whether the fleet came from the slot's
    steady aggregates (``SteadyFleet``) rather than a pass over every pod."""
    with ReplaySource(state, at, stuck_after) as source:
        from_steady = state.judged_delta(source.at, stuck_after) is not None
    for limit in (SWIMLANE_LIMIT, 3, 0):
        with ReplaySource(state, at, stuck_after) as source:
            want = fleet_digest(source.rows(), source.evaluated_at, limit)
        with ReplaySource(state, at, stuck_after) as source:
            assert fleet_at(source, limit) == want, (at, limit)
        with ReplaySource(state, at, stuck_after) as source:  # what the endpoint sends
            assert fleet_json(source, limit) == encode(want), (at, limit)
    with ReplaySource(state, at, stuck_after) as source:
        want = nodes_digest(source.rows(), source.nodes(), source.evaluated_at)
    with ReplaySource(state, at, stuck_after) as source:
        assert nodes_at(source) == want, at
    return from_steady


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
    chosen = picks(state, turning_times(events, 2.0), rng)
    from_steady = [same_pages(state, at, 2.0) for at in chosen]
    # The comparisons above cover the steady aggregates, not only the pass over every pod.
    assert sum(from_steady) > len(chosen) * 3 // 4
    # Asked twice at one time, and after other times: what is kept by pod stays right.
    for at in rng.sample(state.times, 10) * 2:
        same_pages(state, at, 2.0)


def with_placeholders(path: Path, count: int) -> Path:
    """The trace with ``count`` kubelet Events naming, by name alone, pods never watched
    (the fold keeps a ``name:`` placeholder for each: no pod of the fleet page)."""
    event = next(
        orjson.loads(line)
        for line in (TRACES / "rejected-outofcpu.jsonl").read_bytes().splitlines()
        if b'"kind":"Event"' in line
    )
    lines = path.read_bytes().splitlines()
    first = orjson.loads(lines[1])["observed"]
    for i in range(count):
        obj = event["object"]
        obj["metadata"]["name"] = obj["metadata"]["uid"] = f"ghost-event-{i}"
        obj["involvedObject"] = {"kind": "Pod", "namespace": "default", "name": f"ghost-{i}"}
        lines.append(orjson.dumps({**event, "observed": first}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest.mark.parametrize("ghosts", [0, 20])
def test_steady_aggregates_hold_no_pod_the_slot_changes(tmp_path: Path, ghosts: int) -> None:
    """Each slot's ``SteadyFleet`` counts exactly its steady pods, as they are at every
    time of the slot: none its events touch (a touched pod counted from it would be
    stale), each with its node and verdict then, and none twice; placeholders apart."""
    path = with_placeholders(many_pods_trace(tmp_path / "many.jsonl", 300), ghosts)
    state = ReplayState(list(TraceReader(path)), every=150, stuck_after=2.0)
    kept = known(state)
    touched_some = 0
    for steady, checkpoint in zip(state.steady, state.checkpoints, strict=True):
        part = kept.steady[id(steady)]
        items = [it for it in steady.items if not it[4].startswith("name:")]
        uids = [item[4] for item in part.newest]
        assert sorted(uids) == sorted(it[4] for it in items)
        assert not set(uids) & checkpoint.touched
        assert not set(uids) & set(steady.volatile)
        touched_some += bool(checkpoint.touched & checkpoint.pods.keys())
        assert part.count == len(items)
        assert part.verdicts == Counter(it[6].verdict for it in items)
        assert part.handed == Counter((it[5].node, it[6].verdict) for it in items)
        for item in items:  # each one as it is at the checkpoint, so at every time
            assert checkpoint.pods[item[4]] is item[5]
        # Carried from slot to slot, yet what a count of this slot's steady pods gives.
        place = {uid: index for index, uid in enumerate(checkpoint.pods)}
        order = sorted(items, key=lambda it: (kept.created[id(it[5])], place[it[4]]))
        assert uids == [it[4] for it in order]
        for node in {it[5].node for it in items} - {""}:
            rows = [kept.durations[id(it[5])][0] for it in items if it[5].node == node]
            want = [sorted(r[p] for r in rows if r[p] is not None) for p in LATENCY_PLACES]
            assert part.latency[node] == want
        assert part.named.keys() == {it[4] for it in steady.items} - {it[4] for it in items}
    assert touched_some  # slots whose events change pods of their checkpoint were seen
    assert all(len(kept.steady[id(steady)].named) == ghosts for steady in state.steady[1:])
    rng = random.Random(5)
    for at in rng.sample(state.times, 8):  # the placeholders are off the page's samples
        same_pages(state, at, 2.0)


def test_a_pod_out_of_the_steady_ones_is_counted_once(tmp_path: Path) -> None:
    """At times where the judging pass takes steady pods out of its answer (their node
    changed in the slot: ``Delta.out``), the fleet counts them as they are now."""
    events = every_trace()
    state = ReplayState(events, every=7, stuck_after=60.0)
    outs = 0
    for at in state.times:
        with ReplaySource(state, at, 60.0) as source:
            delta = state.judged_delta(source.at, 60.0)
        if delta is not None and delta.out:
            outs += 1
            same_pages(state, at, 60.0)
    assert outs  # the seed situations have such times (node lost, deleted)


def test_ranks_from_the_end_reach_pods_before_the_tail() -> None:
    """The swimlane's ties are broken by places in the timeline, ranked from its end:
    only its last pods at first, every pod once one asked for stands before them."""
    pods = {f"uid-{i}": i for i in range(500)}
    full = {uid: rank for rank, uid in enumerate(reversed(pods))}
    for uids in (["uid-499", "uid-450"], ["uid-498", "uid-3", "uid-0"], list(pods)[::-1]):
        assert replayed._ranks_from_end(pods, uids) == [full[uid] for uid in uids]


def test_ranks_from_the_end_serve_the_fleet_when_old_pods_are_fresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small swimlanes at times where pods created long ago changed in the slot (fresh,
    far from the timeline's end): the ranking of every pod is taken, the answer right."""
    path = many_pods_trace(tmp_path / "many.jsonl", 400)
    state = ReplayState(list(TraceReader(path)), every=150, stuck_after=2.0)
    everyone = 0
    ranks = replayed._ranks_from_end

    def counted(pods: dict[str, object], uids: list[str]) -> list[int]:
        nonlocal everyone
        everyone += any(uid not in set(list(pods)[-len(uids) - 64 :]) for uid in uids)
        return ranks(pods, uids)

    monkeypatch.setattr(replayed, "_ranks_from_end", counted)
    for at in random.Random(9).sample(state.times, 25):
        with ReplaySource(state, at, 2.0) as source:
            want = fleet_digest(source.rows(), source.evaluated_at, 3)
        with ReplaySource(state, at, 2.0) as source:
            assert fleet_json(source, 3) == encode(want), at
    assert everyone  # the fallback was taken, not only the tail


def test_the_fleet_answer_is_gone_before_the_collector_runs_again(tmp_path: Path) -> None:
    """``fleet_json`` makes, encodes and frees the answer with the collector paused: no
    collection runs meanwhile, and the young generation does not grow by its lists
    (none is due after), where an answer held past the pause is there for the next
    young collection (one of its lists after every request, 6 to 10 ms at 50,000 pods)."""
    path = many_pods_trace(tmp_path / "many.jsonl", 400)
    state = ReplayState(list(TraceReader(path)), every=150, stuck_after=2.0)
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)  # CPython's defaults, whatever earlier tests set
    try:
        with ReplaySource(state, state.times[-1], 2.0) as source:
            state.judged_delta(source.at, 2.0)  # the board's pass, made before
            fleet_json(source, SWIMLANE_LIMIT)  # anything cached on first use
            gc.collect()
            # Once more: the count does not go below 0, so the first frees after a
            # collection (the previous answer's objects) are not counted off.
            fleet_json(source, SWIMLANE_LIMIT)
            gc.callbacks.append(seen)
            try:
                young = gc.get_count()[0]
                body = fleet_json(source, SWIMLANE_LIMIT)
                grown = gc.get_count()[0] - young
                during = list(collections)
                kept = fleet_at(source, SWIMLANE_LIMIT)
                held_grown = gc.get_count()[0] - young
                held = collections[len(during) :]
            finally:
                gc.callbacks.remove(seen)
    finally:
        gc.set_threshold(*thresholds)
        if not was_enabled:
            gc.disable()
    lanes = len(orjson.loads(body)["swimlane"]["lanes"])
    assert lanes == len(kept["swimlane"]["lanes"]) == 400
    assert not during
    assert grown < lanes // 4
    # Held past the pause: collected young at once, or waiting for it (a list per lane
    # and per bar).
    assert 0 in held or held_grown > 4 * lanes


def test_the_swimlane_by_columns_equals_the_live_swimlane() -> None:
    """``_swimlane`` (the rows of each shape of lane at once, by columns) equals
    ``fleet.swimlane`` over the same lanes, bar for bar, and reads back as the bars it
    was given: lanes of many shapes, open last bars (one not yet begun at the time
    asked), lanes without bars."""
    from types import SimpleNamespace

    from handoff.live.pages.fleet import swimlane

    rng = random.Random(5)
    stages = ["scheduling", "awaiting-kubelet", "admission", "sandbox", "running", "terminal"]
    now = 1_772_360_000.0
    pods, verdicts, lanes, chosen = [], [], {}, []
    for i in range(300):
        pod = SimpleNamespace(namespace=f"ns-{i % 3}", name=f"p-{i}", uid=f"u-{i}")
        names = [s for s in stages if rng.random() < (0.2 if i < 20 else 0.7)]
        at = now - rng.uniform(10, 500)
        flat: list = []
        for name in names:
            start = at
            at += rng.uniform(0, 20)
            flat += (name, round(start * 1000), round(at * 1000))
        open_start = None
        if names and rng.random() < 0.5:
            open_start = now + 5 if i == 7 else (flat[-2] / 1000)
        first = min(flat[1::3]) if flat else None
        lanes[id(pod)] = (flat, open_start, first, replayed._shape(flat, open_start))
        verdict = rng.choice(["running", "stuck", "rejected"])
        ended = list(flat)
        if open_start is not None:
            now_ms = replayed._ms(now)
            ended[-1] = now_ms if now >= open_start else replayed._ms(open_start)
        pods.append(pod)
        verdicts.append(verdict)
        chosen.append([pod.namespace, pod.name, pod.uid, verdict, ended])
    made = replayed._swimlane(pods, verdicts, lanes, now, 42)
    want = swimlane(chosen, 42)
    assert len({lane[3] for lane in lanes.values()}) > 20  # many shapes
    assert replayed.listed({"swimlane": made})["swimlane"] == want
    assert (
        swimlane_bars(want)
        == [  # the bars read back as they were given
            list(zip(c[4][0::3], c[4][1::3], c[4][2::3], strict=True)) for c in chosen
        ]
    )
    assert encode(made) == encode(want)
