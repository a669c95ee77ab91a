"""A replay's judging pass at any time without judging every pod: ``report.judged``'s
answer from what each checkpoint's slot already knows.

A checkpoint's slot is the span of times whose seek thaws it (from the time of the event
before it to the time of the first event after the next one). Most of the checkpoint's
pods are *steady* there: the events of the slot do not touch them, and none of their
``Judging.turning_points`` falls inside the slot (a margin around it), so they have one
judgement at every time of the slot. Those judgements, their counts and their durations
are worked out once, while the trace is loaded, in one pass that carries them from slot
to slot (``SteadyChain``: a pod stays steady until it is touched, a turning point comes
into the slot, or its node changes). A request at a time then judges only the rest: the
pods the slot's events touch and the few with a turning point in the slot.

The answer is exactly ``report.judged``'s, made by the same code (``ranked_item``,
``report_head``, ``durations.add_samples``, ``OwnerBook.note_ending`` in the pods' order);
anything this shortcut does not cover (another ``stuck_after``, nodes first watched in
the slot, endings already in the fold's owner book) takes ``report.judged`` itself.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from operator import is_not, itemgetter
from typing import Any

from handoff.core.durations import add_samples, new_samples, one_summary
from handoff.core.gcpause import paused_gc
from handoff.core.owners import LOOP_VERDICTS, OwnerBook
from handoff.core.podstate import NodeState, PodState
from handoff.core.report import judged, ranked_item, report_head
from handoff.core.timeline import Timeline
from handoff.core.verdicts import DURATIONS
from handoff.offline.checkpoints import Checkpoint

# Times are epoch seconds (a float's step there is about 2e-7 s): a pod counts as steady
# only when its turning points are this far outside the slot, so no rounding matters.
MARGIN = 1e-3

_NAMES = tuple(name for name, _start, _end in DURATIONS)
_UID, _POD, _JUDGEMENT = 4, 5, 6

# Every pod's ranked item as ``report.judged`` ranks them, made when called (once).
Ranking = Callable[[], list[tuple[Any, ...]]]

# A pod's durations: its sample of each (None without), in DURATIONS order, and the
# names of those it reached that were not observed.
Durations = tuple[tuple[float | None, ...], tuple[str, ...]]


def node_basis(node: NodeState | None) -> tuple[Any, ...] | None:
    """A node as judging may read it: everything but its resourceVersion, which moves
    with every status update (a heartbeat) and judges nothing."""
    if node is None:
        return None
    return (node.exists, node.deleted, node.ready, node.down, node.taints, node.unschedulable)


@dataclass(slots=True)
class Steady:
    """One checkpoint's steady pods and what the request at a time starts from."""

    items: list[tuple[Any, ...]]  # ranked_item of each steady pod, sorted
    counts: Counter[str]
    loops: list[tuple[Any, ...]]  # the items of owned pods with a loop verdict
    volatile: list[str]  # uids neither steady nor touched by the slot: judged per request
    nodes: dict[str, tuple[Any, ...] | None]  # node_basis at the checkpoint
    nodes_known: bool
    samples: dict[str, list[float]] | None = None  # sorted, per duration (on first use)
    unobserved: Counter[str] | None = None
    # How ``items`` differ from the checkpoint before's (by identity): for aggregates of
    # the steady pods carried from checkpoint to checkpoint (the replay's fleet page).
    came: list[tuple[Any, ...]] = field(default_factory=list)
    left: list[tuple[Any, ...]] = field(default_factory=list)


class SteadyChain:
    """Builds each checkpoint's ``Steady`` in turn while the trace is loaded, carrying the
    steady pods over from the checkpoint before (``add`` once per checkpoint, in order)."""

    def __init__(self, stuck_after: float, durations: dict[int, Durations]) -> None:
        self.stuck_after = stuck_after
        self.durations = durations  # id(frozen pod) -> its durations
        self._steady: dict[str, tuple[Any, ...]] = {}
        self._counts: Counter[str] = Counter()
        self._loops: dict[str, tuple[Any, ...]] = {}
        self._sorted: list[tuple[Any, ...]] = []  # the last checkpoint's items, sorted
        self._ends: list[tuple[float, str, int]] = []  # (first point after, uid, id(item))
        self._before: Checkpoint | None = None
        self._volatile: list[str] = []
        self._came: list[tuple[Any, ...]] = []  # kept and dropped by the current add
        self._left: list[tuple[Any, ...]] = []

    def add(self, checkpoint: Checkpoint, low: float, high: float) -> Steady:
        """``checkpoint``'s steady pods for its slot of times ``[low, high]``; its
        ``touched`` and ``removed`` are known (the slot's events were folded)."""
        judging = Timeline(checkpoint.cluster)
        judging.nodes, judging.nodes_known = checkpoint.nodes, checkpoint.nodes_known
        self._came, self._left = [], []
        again = self._carry(checkpoint, high)
        volatile = []
        with paused_gc():
            for uid in again:
                pod = checkpoint.pods.get(uid)
                if pod is None or uid in checkpoint.touched:
                    continue
                points = judging.turning_points(pod, self.stuck_after)
                if any(low - MARGIN <= point <= high + MARGIN for point in points):
                    volatile.append(uid)
                    continue
                item = ranked_item(pod, judging.judge(pod, low, self.stuck_after))
                self._keep(uid, item)
                later = [point for point in points if point > high + MARGIN]
                if later:
                    heapq.heappush(self._ends, (min(later), uid, id(item)))
                if id(pod) not in self.durations:
                    self.durations[id(pod)] = pod_durations(pod)
        self._before, self._volatile = checkpoint, volatile
        return Steady(
            self._items(),
            Counter(self._counts),
            list(self._loops.values()),
            volatile,
            {name: node_basis(node) for name, node in checkpoint.nodes.items()},
            checkpoint.nodes_known,
            came=self._came,
            left=self._left,
        )

    def _carry(self, checkpoint: Checkpoint, high: float) -> set[str]:
        """Drop the pods that are no longer steady; the uids to judge again."""
        before = self._before
        again: set[str] = set(self._volatile)
        if before is not None:
            again |= before.touched
            for uid in before.touched | before.removed:
                self._drop(uid)
            moved = {
                name
                for name, node in checkpoint.nodes.items()
                if node_basis(node) != node_basis(before.nodes.get(name))
            }
            if moved or checkpoint.nodes_known != before.nodes_known:
                for uid, item in list(self._steady.items()):
                    if checkpoint.nodes_known != before.nodes_known or item[_POD].node in moved:
                        self._drop(uid)
                        again.add(uid)
        ends = self._ends
        while ends and ends[0][0] <= high + MARGIN:
            _, uid, ident = heapq.heappop(ends)
            item = self._steady.get(uid)
            if item is not None and id(item) == ident:
                self._drop(uid)
                again.add(uid)
        for uid in checkpoint.touched:
            if self._drop(uid):
                again.add(uid)
        return again

    def _items(self) -> list[tuple[Any, ...]]:
        """The steady pods ranked: the last checkpoint's still steady, merged with the
        new ones (two sorted runs, one merge), not a sort of them all."""
        steady = self._steady
        kept = [it for it in self._sorted if steady.get(it[_UID]) is it]
        known = {id(it) for it in kept}
        added = sorted(it for it in steady.values() if id(it) not in known)
        kept.extend(added)
        kept.sort()
        self._sorted = kept
        return kept

    def _keep(self, uid: str, item: tuple[Any, ...]) -> None:
        self._steady[uid] = item
        self._came.append(item)
        self._counts[item[_JUDGEMENT].verdict] += 1
        if _loops(item):
            self._loops[uid] = item

    def _drop(self, uid: str) -> bool:
        item = self._steady.pop(uid, None)
        if item is None:
            return False
        self._left.append(item)
        self._counts[item[_JUDGEMENT].verdict] -= 1
        self._loops.pop(uid, None)
        return True


@dataclass(slots=True)
class Delta:
    """How the pods judged at a time differ from their checkpoint's steady ones: the
    steady items not in the answer (``out``) and the items judged for the time
    (``fresh``, in no particular order), with the durations of each."""

    steady: Steady
    out: list[tuple[Any, ...]]
    fresh: list[tuple[Any, ...]]
    out_durations: list[Durations]
    fresh_durations: list[Durations]


def steady_samples(steady: Steady, durations: dict[int, Durations]) -> None:
    """Once per slot, at its first request: the steady pods' sorted samples and not
    observed counts (``Steady.samples``), from each frozen pod's durations worked out
    while the trace loaded (``durations``, by the pod's id)."""
    if steady.samples is not None:
        return
    rows = list(map(durations.get, map(id, map(_pod_of, steady.items))))
    if None in rows:
        rows = [
            known if known is not None else pod_durations(item[_POD])
            for known, item in zip(rows, steady.items, strict=True)
        ]
    steady.unobserved = Counter(chain.from_iterable(map(_missed_of, rows)))
    steady.samples = _columns(rows)


def pod_durations(pod: PodState) -> Durations:
    """What ``add_samples`` adds for this pod (at most one sample per duration)."""
    samples: dict[str, Any] = new_samples()
    unobserved: dict[str, int] = {}
    add_samples(pod, samples, unobserved)
    values = tuple(found[0] if found else None for found in samples.values())
    return values, tuple(unobserved)


class SteadyJudging:
    """``report.judged`` for a timeline thawed from a checkpoint and folded on within
    its slot, from that checkpoint's ``Steady``."""

    def __init__(self, stuck_after: float, durations: dict[int, Durations]) -> None:
        self.stuck_after = stuck_after
        self.durations = durations

    def judged(
        self,
        timeline: Timeline,
        checkpoint: Checkpoint,
        steady: Steady,
        at: float,
        stuck_after: float,
    ) -> tuple[dict[str, Any], Ranking, Delta | None]:
        """``report.judged``'s head and ranking (made when first asked for: the fleet
        page reads the delta alone), and how they differ from the steady pods (None
        when every pod was judged: no shortcut applied)."""
        if (
            stuck_after != self.stuck_after
            or timeline.nodes_known != steady.nodes_known
            or timeline.owners.endings
        ):
            return self._every_pod(timeline, at, stuck_after)
        with paused_gc():
            answer = self._judged(timeline, checkpoint, steady, at)
        return answer if answer is not None else self._every_pod(timeline, at, stuck_after)

    @staticmethod
    def _every_pod(
        timeline: Timeline, at: float, stuck_after: float
    ) -> tuple[dict[str, Any], Ranking, None]:
        head, ranked = judged(timeline, at, stuck_after)
        return head, partial(_as_made, ranked), None

    def _judged(
        self, timeline: Timeline, checkpoint: Checkpoint, steady: Steady, at: float
    ) -> tuple[dict[str, Any], Ranking, Delta] | None:
        pods = timeline.pods
        moved = {
            name
            for name, node in timeline.nodes.items()
            if node_basis(node) != steady.nodes.get(name)
        }
        gone = {uid for uid in checkpoint.removed if uid not in pods}
        out = (
            [it for it in steady.items if it[_UID] in gone or it[_POD].node in moved]
            if moved or gone
            else []
        )
        out_uids = {it[_UID] for it in out}
        fresh = []
        for uid in checkpoint.touched | set(steady.volatile) | out_uids:
            pod = pods.get(uid)
            if pod is not None:
                fresh.append(ranked_item(pod, timeline.judge(pod, at, self.stuck_after)))
        if len(steady.items) - len(out) + len(fresh) != len(pods):
            return None  # a pod this shortcut did not foresee: judge them all
        counts = Counter(steady.counts)
        for item in out:
            counts[item[_JUDGEMENT].verdict] -= 1
        for item in fresh:
            counts[item[_JUDGEMENT].verdict] += 1
        delta = Delta(
            steady,
            out,
            list(fresh),
            [self._of(item[_POD]) for item in out],
            [self._of(item[_POD]) for item in fresh],
        )
        durations = self._durations(steady, delta.out_durations, delta.fresh_durations)
        owners = OwnerBook(timeline.owners.data())
        self._note_endings(owners, timeline, steady, out_uids, fresh)
        counts = +counts  # verdicts with no pod left are not listed, as in report.judged
        head = report_head(timeline, at, self.stuck_after, counts, durations, owners)
        return head, partial(_ranked, steady, out_uids, fresh), delta

    def _durations(
        self, steady: Steady, gone: list[Durations], new: list[Durations]
    ) -> dict[str, dict[str, Any]]:
        """``summarise`` of every pod's samples: the steady pods' (sorted once per slot)
        without those of the pods gone, with the new ones', by order statistics instead
        of a sort."""
        steady_samples(steady, self.durations)
        unobserved = Counter(steady.unobserved)
        for _values, missed in gone:
            unobserved.subtract(missed)
        for _values, missed in new:
            unobserved.update(missed)
        removed = _columns(gone)
        added = _columns(new)
        return {
            name: one_summary(
                _Merged(steady.samples[name], removed[name], added[name]),
                unobserved.get(name, 0),
            )
            for name in _NAMES
        }

    def _of(self, pod: PodState) -> Durations:
        known = self.durations.get(id(pod))
        return known if known is not None else pod_durations(pod)

    def _note_endings(
        self,
        owners: OwnerBook,
        timeline: Timeline,
        steady: Steady,
        out_uids: set[str],
        fresh: list[tuple[Any, ...]],
    ) -> None:
        """``note_ending`` for every owned pod, in the timeline's order, as
        ``report.judged`` calls it. With no ending in the fold's book, a pod judged
        otherwise than a loop verdict has nothing to forget: only the others are noted."""
        endings = [it for it in steady.loops if it[_UID] not in out_uids]
        endings.extend(it for it in fresh if _loops(it))
        if not endings:
            return
        order = {uid: index for index, uid in enumerate(timeline.pods)}
        endings.sort(key=lambda it: order[it[_UID]])
        for item in endings:
            judgement = item[_JUDGEMENT]
            owners.note_ending(item[_POD], judgement.verdict, judgement.reason)


def _columns(rows: list[Durations]) -> dict[str, list[float]]:
    """Per duration, the sorted samples of these pods (C-level loops: 100,000s of them)."""
    if not rows:
        return {name: [] for name in _NAMES}
    columns = zip(*map(_values_of, rows), strict=True)
    return {
        name: sorted(filter(_not_none, column))
        for name, column in zip(_NAMES, columns, strict=True)
    }


_pod_of = itemgetter(_POD)
_values_of = itemgetter(0)
_missed_of = itemgetter(1)
_not_none = partial(is_not, None)


def _loops(item: tuple[Any, ...]) -> bool:
    return item[_POD].owner is not None and item[_JUDGEMENT].verdict in LOOP_VERDICTS


def _as_made(ranked: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return ranked


def _ranked(
    steady: Steady, out_uids: set[str], fresh: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    """Every pod ranked as ``report.judged`` ranks them: the steady pods (sorted while
    the trace loaded) without ``out_uids``, merged with the ones judged for this time
    (a copy and a merge of every pod's item: ≈ 13 ms at 50,000 pods)."""
    if out_uids:
        ranked = [it for it in steady.items if it[_UID] not in out_uids]
    else:
        ranked = list(steady.items)
    fresh.sort()
    ranked.extend(fresh)
    ranked.sort()  # two sorted runs: one merge
    return ranked


class _Merged(Sequence[float]):
    """The sorted values of ``base`` without ``removed`` (a sub-multiset of it) and with
    ``added``, each sorted: element ``i`` by binary search, without building the list."""

    def __init__(self, base: list[float], removed: list[float], added: list[float]) -> None:
        self.base, self.removed, self.added = base, removed, added

    def __len__(self) -> int:
        return len(self.base) - len(self.removed) + len(self.added)

    def _at_most(self, value: float) -> int:
        return (
            bisect_right(self.base, value)
            - bisect_right(self.removed, value)
            + bisect_right(self.added, value)
        )

    def _first(self, values: list[float], rank: int) -> float:
        """The least of ``values`` with at least ``rank`` values at most it (or inf)."""
        low, high = 0, len(values)
        while low < high:
            middle = (low + high) // 2
            if self._at_most(values[middle]) >= rank:
                high = middle
            else:
                low = middle + 1
        return values[low] if low < len(values) else math.inf

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, int) or not 0 <= index < len(self):
            raise IndexError(index)
        rank = index + 1
        return min(self._first(self.base, rank), self._first(self.added, rank))
