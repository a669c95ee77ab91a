"""The replay's fleet and nodes pages at any time, without a row per pod (issue 19 item 3).

``fleet_digest`` and ``nodes_digest`` over ``ReplaySource.rows()`` judge every pod again
and make a row of each: 1.5 s of CPU at 50,000 pods. Here each pod's judgement comes from
the judging pass the board makes anyway (``ReplayState.judged_at``, where a checkpoint's
steady pods were judged once, while loading); what a page takes from a pod that does not
change with the time asked (its durations, its creation time as text, its stage bars but
an open last one) is worked out once per frozen pod (a checkpoint's own, alive as long as
the state, so its id is its own) and kept by its id; the rest are passes over the pods
made in C (``map``, ``zip``, ``Counter``, ``sorted``).

The fleet page does not even pass over every pod when the judging pass took its
shortcut (``ReplayState.judged_delta``): the aggregates of the slot's steady pods were
counted while loading (``steadyfleet.SteadyFleet``), and only the pods the time judged
apart are merged in (``_fleet_from_steady``).

The swimlane's 10,000 lanes are made by columns from each pod's kept bars
(``_swimlane``: the lanes of one shape hold each stage at the same place, so their rows
are one ``zip`` of columns, no Python step per bar), as tuples: the same JSON as
lists (``fleet_at`` turns them into lists, as ``fleet_digest`` has them). Made so, the
answer also encodes and frees in ≈ 5 ms each instead of ≈ 20 (docs/benchmarks.md).
The endpoint takes the answer encoded (``fleet_json``), made and freed with the
collector paused.

The answers are exactly ``fleet_digest``'s and ``nodes_digest``'s over the same pods
(tests/webui/detail/test_replayed.py compares them at many times, and the bytes sent).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Iterable
from functools import partial
from itertools import chain, compress, islice, repeat
from itertools import count as counting
from operator import attrgetter, is_not, itemgetter, sub
from typing import Any

from handoff.core.gcpause import paused_gc
from handoff.core.podstate import CREATED, PodState
from handoff.core.trace import format_time
from handoff.core.verdicts import DURATIONS
from handoff.core.views import stage_bars
from handoff.live.aggregates import as_written
from handoff.live.pages.fleet import (
    FAILURES,
    FLEET_DURATIONS,
    HEATMAP_LATENCY,
    STAGE_NAMES,
    STAGE_PLACE,
    Fleet,
    rank_nodes,
)
from handoff.live.pages.nodes import Nodes
from handoff.live.pages.rows import row_from_pod
from handoff.offline.judging import Delta, Durations, pod_durations
from handoff.offline.replay import ReplayState
from webui.detail.sources import ReplaySource
from webui.detail.steadyfleet import (
    SteadyFleet,
    SteadyFleetChain,
    merged,
    placeholder,
    present,
    verdict_of,
)
from webui.jsonbody import encode

_PLACE = {name: place for place, (name, _start, _end) in enumerate(DURATIONS)}
_UID, _POD, _JUDGEMENT = 4, 5, 6  # of report.ranked_item's tuples
_values_of = itemgetter(0)
_missed_of = itemgetter(1)
_uid_of = attrgetter("uid")
_node_of = attrgetter("node")
_verdict_of = attrgetter("verdict")
_not_none = partial(is_not, None)
_first_of = itemgetter(2)
_flat_of = itemgetter(0)  # of a Lane
_open_of = itemgetter(1)
_shape_of = itemgetter(3)
_namespace_of = attrgetter("namespace")
_name_of = attrgetter("name")
_pod_item = itemgetter(_POD)
_uid_item = itemgetter(_UID)
_judgement_item = itemgetter(_JUDGEMENT)

# A pod's swimlane entry without its verdict: its bars flat in epoch ms, the start of
# an open last bar (which ends at the time asked) or None when none is open, the
# earliest start in ms (None without bars), and its shape (its bars' stage names, and
# whether the last is open): ends move with the time, starts and shapes do not.
Shape = tuple[tuple[str, ...], bool]
Lane = tuple[list[Any], float | None, int | None, Shape]
_SHAPES: dict[Shape, Shape] = {}  # one tuple per shape, shared by the lanes of it


class _Known:
    """What the pages take from a state's frozen pods (every checkpoint's), by the pod's
    id, worked out once (``known``): their durations, creation times as text, lanes;
    and the fleet aggregates of each checkpoint's steady pods (``SteadyFleet``), by the
    id of the checkpoint's ``Steady``."""

    def __init__(self, state: ReplayState) -> None:
        self.durations: dict[int, Durations] = dict(state.frozen_durations)
        self.created: dict[int, str] = {}
        self.lanes: dict[int, Lane] = {}
        with paused_gc():
            for checkpoint in state.checkpoints:
                for pod in checkpoint.pods.values():
                    key = id(pod)
                    if key in self.lanes:
                        continue
                    if key not in self.durations:
                        self.durations[key] = pod_durations(pod)
                    self.created[key] = _created(pod)
                    self.lanes[key] = _lane_at(pod, state.end)
            chain = SteadyFleetChain(self.created, self.durations)
            self.steady: dict[int, SteadyFleet] = {
                id(steady): chain.add(steady, checkpoint)
                for steady, checkpoint in zip(state.steady, state.checkpoints, strict=True)
            }


_KNOWN: weakref.WeakKeyDictionary[ReplayState, _Known] = weakref.WeakKeyDictionary()
_KNOWN_LOCK = threading.Lock()


def known(state: ReplayState) -> _Known:
    """The state's frozen pods as the pages take them: made at its first use (the trace
    loader makes it right after the fold, so no page waits for it)."""
    with _KNOWN_LOCK:
        found = _KNOWN.get(state)
        if found is None:
            found = _KNOWN[state] = _Known(state)
        return found


def _created(pod: PodState) -> str:
    """The creation time as a row has it (RFC 3339, "" when unknown)."""
    created = pod.milestones[CREATED]
    return format_time(created) if created is not None else ""


class _Pods:
    """The pods at the source's time as ``ReplaySource.rows()`` gives them (the
    timeline's order, no placeholders), each with its judgement and durations."""

    def __init__(self, source: ReplaySource) -> None:
        _head, ranked = source.state.judged_at(source.at, source.stuck_after)
        judged = dict(
            zip(map(itemgetter(_UID), ranked), map(itemgetter(_JUDGEMENT), ranked), strict=True)
        )
        self.source = source
        self.known = known(source.state)
        self.pods = [p for p in source.timeline.pods.values() if not p.uid.startswith("name:")]
        self.judgements = list(map(judged.__getitem__, map(_uid_of, self.pods)))
        self.verdicts = list(map(_verdict_of, self.judgements))
        self.nodes = list(map(_node_of, self.pods))
        self.durations = self._durations()

    def _durations(self) -> list[Durations]:
        found: list[Durations | None] = list(map(self.known.durations.get, map(id, self.pods)))
        for place in [i for i, d in enumerate(found) if d is None]:  # thawed: changed
            found[place] = pod_durations(self.pods[place])
        return found  # type: ignore[return-value]

    def created(self) -> list[str]:
        """Each pod's creation time as its row has it."""
        out: list[str | None] = list(map(self.known.created.get, map(id, self.pods)))
        for place in [i for i, text in enumerate(out) if text is None]:
            out[place] = _created(self.pods[place])
        return out  # type: ignore[return-value]


def _ms(moment: float) -> int:
    """An instant in ms as a lane has it (its view's RFC 3339 text, read back)."""
    return round(as_written(moment) * 1000)


def _lane_at(pod: PodState, now: float) -> Lane:
    """The pod's bars at ``now``; only an open last bar's end depends on the time."""
    bars = stage_bars(pod.milestones, now)
    flat: list[Any] = []
    ms: dict[float, int] = {}  # bars share their instants: one's end, the next's start
    for name, start, end, _open in bars:
        start_ms = ms.get(start)
        if start_ms is None:
            start_ms = ms[start] = _ms(start)
        end_ms = ms.get(end)
        if end_ms is None:
            end_ms = ms[end] = _ms(end)
        flat += (name, start_ms, end_ms)
    first = min(flat[1::3]) if flat else None
    open_start = bars[-1][1] if bars and bars[-1][3] else None
    return flat, open_start, first, _shape(flat, open_start)


def _shape(flat: list[Any], open_start: float | None) -> Shape:
    shape = (tuple(flat[0::3]), open_start is not None)
    return _SHAPES.setdefault(shape, shape)


def _swimlane(
    pods: list[PodState], verdicts: list[str], lanes: dict[int, Lane], now: float, left_out: int
) -> dict[str, Any]:
    """``fleet.swimlane`` of the chosen pods' lanes (oldest first, with their verdicts),
    made by columns from their bars as ``known`` keeps them. The lanes of one shape hold
    each stage at the same place of their flat bars, so their rows are one ``zip`` of
    columns (``itemgetter``, ``map``: no Python step per bar), a tuple each: the same
    JSON as ``fleet.swimlane``'s lists (``listed`` makes them lists). An open last bar
    ends at ``now``."""
    records = [lanes.get(id(pod)) or _lane_at(pod, now) for pod in pods]
    base = min(filter(_not_none, map(_first_of, records)), default=0)
    groups: dict[Shape, list[int]] = {}
    for lane, shape in enumerate(map(_shape_of, records)):
        members = groups.get(shape)
        if members is None:
            groups[shape] = [lane]
        else:
            members.append(lane)
    rows: list[tuple[int, ...]] = [()] * len(records)
    for (names, is_open), members in groups.items():
        if not names:
            continue  # no bars: the row stays empty
        chosen = list(map(records.__getitem__, members))
        flats = list(map(_flat_of, chosen))
        last = len(names) - 1
        columns: list[Iterable[int]] = []
        previous: Iterable[int] = repeat(base)
        for place, name in enumerate(names):
            starts = list(map(itemgetter(3 * place + 1), flats))
            if is_open and place == last:
                ends = _open_ends(chosen, now)
            else:
                ends = list(map(itemgetter(3 * place + 2), flats))
            columns += (
                repeat(STAGE_PLACE[name]),
                map(sub, starts, previous),
                map(sub, ends, starts),
            )
            previous = ends
        # The repeated places are endless; the starts and lengths have one per member.
        for lane, row in zip(members, zip(*columns, strict=False), strict=True):
            rows[lane] = row
    heads = list(
        zip(
            map(_namespace_of, pods), map(_name_of, pods), map(_uid_of, pods), verdicts, strict=True
        )
    )
    return {
        "base_ms": base,
        "stages": STAGE_NAMES,
        "lanes": heads,
        "bars": rows,
        "left_out": left_out,
    }


def _open_ends(records: list[Lane], now: float) -> list[int]:
    """The ends of these lanes' open last bars at ``now`` (none ends before it starts)."""
    now_ms = _ms(now)
    return [
        now_ms if now >= open_start else _ms(open_start) for open_start in map(_open_of, records)
    ]


def listed(answer: dict[str, Any]) -> dict[str, Any]:
    """The fleet answer with its swimlane's tuples as lists, as ``fleet_digest`` has
    them (the same JSON either way)."""
    lanes = answer["swimlane"]
    lanes["lanes"] = list(map(list, lanes["lanes"]))
    lanes["bars"] = list(map(list, lanes["bars"]))
    return answer


def fleet_at(source: ReplaySource, swimlane_limit: int) -> dict[str, Any]:
    """``fleet_digest(source.rows(), source.evaluated_at, swimlane_limit)``. With the
    collector paused: what it makes holds no cycles, and a full collection would walk
    the whole trace (about 1.5 s at 500,000 events)."""
    with paused_gc():
        return listed(_fleet(source, swimlane_limit))


def fleet_json(source: ReplaySource, swimlane_limit: int) -> bytes:
    """``fleet_at``'s answer as the API sends it (``jsonbody.encode``): made, encoded
    and freed with the collector paused, so its ≈ 80,000 lists (the swimlane's lanes
    and bars) are gone before it runs again and never cost a young collection (6 to
    10 ms a request at 50,000 pods)."""
    with paused_gc():
        return encode(_fleet(source, swimlane_limit))


def _fleet(source: ReplaySource, swimlane_limit: int) -> dict[str, Any]:
    delta = source.state.judged_delta(source.at, source.stuck_after)
    if delta is not None:
        return _fleet_from_steady(source, swimlane_limit, delta)
    return _fleet_of_every_pod(source, swimlane_limit)


Judged = list[tuple[tuple[Any, ...], Durations]]  # ranked items with their durations


def _fleet_from_steady(source: ReplaySource, swimlane_limit: int, delta: Delta) -> dict[str, Any]:
    """The answer from the slot's ``SteadyFleet`` and the pods judged apart at this
    time: the steady ones out of the answer (``gone``) and the fresh ones (``new``)."""
    known_pods = known(source.state)
    part = known_pods.steady[id(delta.steady)]
    gone = [
        (item, found)
        for item, found in zip(delta.out, delta.out_durations, strict=True)
        if not placeholder(item)
    ]
    new = [
        (item, found)
        for item, found in zip(delta.fresh, delta.fresh_durations, strict=True)
        if not placeholder(item)
    ]
    fleet = Fleet(swimlane_limit)
    fleet.total = part.count - len(gone) + len(new)
    fleet.verdicts = Counter(part.verdicts)
    fleet.verdicts.subtract(verdict_of(item) for item, _ in gone)
    fleet.verdicts.update(verdict_of(item) for item, _ in new)
    out_uids = {item[_UID] for item in delta.out}
    _add_durations(fleet, delta, part, out_uids, new)
    _add_nodes(fleet, part, gone, new)
    pods, verdicts = _newest(source, known_pods, part, out_uids, new, swimlane_limit)
    lanes = _swimlane(pods, verdicts, known_pods.lanes, source.at, fleet.total - len(pods))
    return fleet.answer_with(source.evaluated_at, lanes)


def _add_durations(
    fleet: Fleet, delta: Delta, part: SteadyFleet, out_uids: set[str], new: Judged
) -> None:
    """The fleet's samples and not observed counts. The judging pass's hold every
    steady pod: off go those out of the answer and the steady placeholders (no pods of
    this page), on come the fresh pods'."""
    removed = list(delta.out_durations)
    removed += [found for uid, found in part.named.items() if uid not in out_uids]
    added = [found for _item, found in new]
    samples, unobserved = delta.steady.samples, delta.steady.unobserved
    assert samples is not None  # judged_delta's pass made them
    assert unobserved is not None
    for name in FLEET_DURATIONS:
        place = _PLACE[name]
        fleet.samples[name] = merged(samples[name], present(removed, place), present(added, place))
    fleet.unobserved = Counter(unobserved)
    fleet.unobserved.subtract(chain.from_iterable(map(_missed_of, removed)))
    fleet.unobserved.update(chain.from_iterable(map(_missed_of, added)))


def _add_nodes(fleet: Fleet, part: SteadyFleet, gone: Judged, new: Judged) -> None:
    """Pods and failures per node, and the latency samples of the heatmap's nodes: the
    steady pods' without those out of the answer, with the fresh ones."""
    handed = Counter(part.handed)
    handed.subtract((item[_POD].node, verdict_of(item)) for item, _ in gone)
    handed.update((item[_POD].node, verdict_of(item)) for item, _ in new)
    for (node, verdict_name), pods in handed.items():
        if node and pods > 0:
            fleet.pods[node] += pods
            if verdict_name in FAILURES:
                fleet.failures.setdefault(node, Counter())[verdict_name] = pods
    ranked, _more = rank_nodes(fleet.pods, fleet.failures)
    moved: dict[str, tuple[list[Durations], list[Durations]]] = {n: ([], []) for n in ranked}
    for side, judged in enumerate((gone, new)):
        for item, found in judged:
            lists = moved.get(item[_POD].node)
            if lists is not None:
                lists[side].append(found)
    for node, (off, on) in moved.items():
        steady = part.latency.get(node)
        fleet.latency[node] = {
            name: merged(
                steady[index] if steady is not None else [],
                present(off, _PLACE[name]),
                present(on, _PLACE[name]),
            )
            for index, name in enumerate(HEATMAP_LATENCY)
        }


def _newest(
    source: ReplaySource,
    known_pods: _Known,
    part: SteadyFleet,
    out_uids: set[str],
    new: Judged,
    limit: int,
) -> tuple[list[PodState], list[str]]:
    """The ``limit`` newest pods by creation (ties in the timeline's order), oldest
    first, each with its verdict. ``part.newest`` is the steady pods in that order
    (their places keep their order at every time of the slot), so only its last
    ``limit`` still in the answer can be among them; with the fresh ones, these few are
    ranked by their places now."""
    if not limit:
        return [], []
    if out_uids:
        steady = reversed(part.newest)
        candidates = list(islice((it for it in steady if it[_UID] not in out_uids), limit))
    else:
        candidates = part.newest[-limit:]
    candidates += map(_values_of, new)
    pods = list(map(_pod_item, candidates))
    texts = _created_texts(known_pods, pods)
    ranks = _ranks_from_end(source.timeline.pods, list(map(_uid_item, candidates)))
    order = sorted(range(len(candidates)), key=ranks.__getitem__, reverse=True)
    order.sort(key=texts.__getitem__)  # stable: ties stay in the timeline's order
    chosen = order[-limit:]
    judgements = map(_judgement_item, map(candidates.__getitem__, chosen))
    return list(map(pods.__getitem__, chosen)), list(map(_verdict_of, judgements))


def _created_texts(known_pods: _Known, pods: list[PodState]) -> list[str]:
    """Each pod's creation time as its row has it (thawed pods' worked out now)."""
    texts: list[str | None] = list(map(known_pods.created.get, map(id, pods)))
    for place in [i for i, text in enumerate(texts) if text is None]:
        texts[place] = _created(pods[place])
    return texts  # type: ignore[return-value]


def _ranks_from_end(pods: dict[str, Any], uids: list[str]) -> list[int]:
    """Each uid's rank from the end of ``pods``' order (0 the last). The newest pods by
    creation are mostly the timeline's last, so only as many as asked for (and a few)
    are ranked, unless one stands before them: a dict of every pod costs ≈ 15 ms at
    50,000 pods."""
    ranks = dict(zip(islice(reversed(pods), len(uids) + 64), counting()))
    try:
        return list(map(ranks.__getitem__, uids))
    except KeyError:
        ranks = dict(zip(reversed(pods), counting()))
        return list(map(ranks.__getitem__, uids))


def _fleet_of_every_pod(source: ReplaySource, swimlane_limit: int) -> dict[str, Any]:
    """The answer from a pass over every pod (when the judging pass judged them all)."""
    pods = _Pods(source)
    fleet = Fleet(swimlane_limit)
    fleet.total = len(pods.pods)
    fleet.verdicts = Counter(pods.verdicts)
    values = list(map(_values_of, pods.durations))
    wanted_columns = {*FLEET_DURATIONS, *HEATMAP_LATENCY}
    columns = {name: list(map(itemgetter(_PLACE[name]), values)) for name in wanted_columns}
    for name in FLEET_DURATIONS:
        fleet.samples[name] = sorted(filter(_not_none, columns[name]))
    fleet.unobserved = Counter(chain.from_iterable(map(_missed_of, pods.durations)))
    fleet.pods = Counter(filter(None, pods.nodes))
    for (node, verdict), count in Counter(zip(pods.nodes, pods.verdicts, strict=True)).items():
        if node and verdict in FAILURES:
            fleet.failures.setdefault(node, Counter())[verdict] = count
    ranked, _more = rank_nodes(fleet.pods, fleet.failures)
    wanted = set(ranked)
    flags = list(map(wanted.__contains__, pods.nodes))
    for node in wanted:
        fleet.latency[node] = {name: [] for name in HEATMAP_LATENCY}
    for name in HEATMAP_LATENCY:
        column = columns[name]
        for node, value in compress(zip(pods.nodes, column, strict=True), flags):
            if value is not None:
                fleet.latency[node][name].append(value)
    chosen: list[int] = []
    if swimlane_limit:
        # The newest by creation, ties in the timeline's order (``Fleet.add``'s arrival):
        # a sort, as the pods come nearly in creation order.
        order = sorted(zip(pods.created(), range(len(pods.pods)), strict=True))
        chosen = [place for _created, place in order[-swimlane_limit:]]
    lanes = _swimlane(
        list(map(pods.pods.__getitem__, chosen)),
        list(map(pods.verdicts.__getitem__, chosen)),
        pods.known.lanes,
        source.at,
        fleet.total - len(chosen),
    )
    return fleet.answer_with(source.evaluated_at, lanes)


def nodes_at(source: ReplaySource) -> dict[str, Any]:
    """``nodes_digest(source.rows(), source.nodes(), source.evaluated_at)``, with the
    collector paused (see ``fleet_at``)."""
    with paused_gc():
        return _nodes(source)


def _nodes(source: ReplaySource) -> dict[str, Any]:
    pods = _Pods(source)
    acc = Nodes()
    for (node, verdict), count in Counter(zip(pods.nodes, pods.verdicts, strict=True)).items():
        if node:
            acc.handed.setdefault(node, Counter())[verdict] = count
    timeline, at, stuck_after = source.timeline, source.at, source.stuck_after
    for pod, judgement in zip(pods.pods, pods.judgements, strict=True):
        if pod.node and judgement.node_exists is False:
            row = row_from_pod(timeline, pod, at, stuck_after)
            acc.missing.setdefault(pod.node, []).append(row)
    return acc.result(source.nodes(), source.evaluated_at)
