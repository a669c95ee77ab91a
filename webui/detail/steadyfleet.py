"""The replay fleet page's aggregates of one checkpoint's steady pods (issue 19 item 3).

A checkpoint's steady pods (``handoff.offline.judging``) keep one judgement, one node
and the same durations at every time of its slot, so what the fleet page counts of them
is worked out while the trace is loaded, carried from checkpoint to checkpoint
(``SteadyFleetChain``): verdicts, pods and verdicts per node,
each node's latency samples sorted, and the pods in the swimlane's order. A request
then takes these and merges only the pods its time judged apart (``Delta``: the steady
ones out of the answer, and the fresh ones), instead of passing over every pod; the
duration samples of the whole fleet are the judging pass's own (``Steady.samples``).

Name placeholders (pods known only from events, ``name:`` uids) are no pods of the
fleet page: they are left out here, and taken off the judging pass's samples.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterable
from itertools import chain, compress, count, islice
from operator import not_
from typing import Any

from handoff.core.verdicts import DURATIONS
from handoff.live.pages.fleet import HEATMAP_LATENCY
from handoff.offline.checkpoints import Checkpoint
from handoff.offline.judging import Durations, Steady

PLACES = {name: place for place, (name, _start, _end) in enumerate(DURATIONS)}
LATENCY_PLACES = tuple(PLACES[name] for name in HEATMAP_LATENCY)
UID, POD, JUDGEMENT = 4, 5, 6  # of report.ranked_item's tuples


def placeholder(item: tuple[Any, ...]) -> bool:
    """A name placeholder's item: no pod of the fleet page."""
    return item[UID].startswith("name:")


def verdict_of(item: tuple[Any, ...]) -> str:
    return item[JUDGEMENT].verdict


class SteadyFleet:
    """One checkpoint's steady pods as the fleet page counts them (placeholders left
    out). Made by ``SteadyFleetChain``, never changed after."""

    __slots__ = ("count", "handed", "latency", "named", "newest", "verdicts")

    def __init__(self) -> None:
        self.count = 0
        self.verdicts: Counter[str] = Counter()
        self.handed: Counter[tuple[str, str]] = Counter()  # (node, verdict): pods
        # Per node (unscheduled pods left out), each HEATMAP_LATENCY duration's samples
        # of its pods, sorted.
        self.latency: dict[str, list[list[float]]] = {}
        # The placeholders' durations, in the judging pass's samples but not the page's.
        self.named: dict[str, Durations] = {}
        # The items in the swimlane's order: by creation text, ties in the timeline's
        # order (a steady pod keeps its place among the others at every time of the slot).
        self.newest: list[tuple[Any, ...]] = []


class SteadyFleetChain:
    """Each checkpoint's ``SteadyFleet`` in turn (``add`` once per checkpoint, in order),
    carried from the checkpoint before: most steady pods stay steady from one slot to
    the next (the same ranked item), so only those that left and came are counted.
    ``created`` and ``durations``: the frozen pods' creation texts and durations, by the
    pod's id."""

    def __init__(self, created: dict[int, str], durations: dict[int, Durations]) -> None:
        self.created = created
        self.durations = durations
        self._before = SteadyFleet()

    def add(self, steady: Steady, checkpoint: Checkpoint) -> SteadyFleet:
        """``steady``'s part: the one before's, less ``steady.left``, with ``steady.came``
        (what ``SteadyChain`` dropped and kept on the way to this checkpoint)."""
        dropped, added = steady.left, steady.came
        before, part = self._before, SteadyFleet()
        part.named = dict(before.named)
        for item in dropped:
            if placeholder(item):
                del part.named[item[UID]]
        for item in added:
            if placeholder(item):
                part.named[item[UID]] = self.durations[id(item[POD])]
        dropped = [item for item in dropped if not placeholder(item)]
        added = [item for item in added if not placeholder(item)]
        part.count = before.count - len(dropped) + len(added)
        part.verdicts = before.verdicts.copy()
        part.verdicts.subtract(map(verdict_of, dropped))
        part.verdicts.update(map(verdict_of, added))
        part.handed = before.handed.copy()
        part.handed.subtract(map(_handed, dropped))
        part.handed.update(map(_handed, added))
        part.latency = self._latency(before.latency, dropped, added)
        part.newest = self._newest(before.newest, steady.left, added, checkpoint)
        self._before = part
        return part

    def _latency(
        self,
        before: dict[str, list[list[float]]],
        dropped: list[tuple[Any, ...]],
        added: list[tuple[Any, ...]],
    ) -> dict[str, list[list[float]]]:
        """The nodes' sorted samples: the lists of a node no pod left or came to are
        shared with the checkpoint before (they are never changed)."""
        changes: dict[str, tuple[list[Durations], list[Durations]]] = {}
        for side, items in enumerate((dropped, added)):
            for item in items:
                pod = item[POD]
                if pod.node:
                    changes.setdefault(pod.node, ([], []))[side].append(self.durations[id(pod)])
        latency = dict(before)
        for node, (off, on) in changes.items():
            lists = latency.get(node) or [[] for _ in LATENCY_PLACES]
            latency[node] = [
                merged(lists[index], present(off, place), present(on, place))
                for index, place in enumerate(LATENCY_PLACES)
            ]
        return latency

    def _newest(
        self,
        before: list[tuple[Any, ...]],
        left: list[tuple[Any, ...]],
        added: list[tuple[Any, ...]],
        checkpoint: Checkpoint,
    ) -> list[tuple[Any, ...]]:
        """The items in the swimlane's order: the ones kept keep theirs (their places in
        the checkpoint's dict keep their order), the ones that came merged in."""
        gone = set(map(id, left))
        kept = list(compress(before, map(not_, map(gone.__contains__, map(id, before)))))
        if not added:
            return kept
        places = _Places(checkpoint.pods, 2 * len(added) + 64)
        created = self.created

        def key(item: tuple[Any, ...]) -> tuple[str, int]:
            return created[id(item[POD])], places.of(item[UID])

        # From the newest down: the pods that came are mostly newer than every kept one,
        # found so with one comparison each instead of a binary search.
        keys = list(map(key, added))
        pieces: list[list[tuple[Any, ...]]] = []
        high = len(kept)
        for index in sorted(range(len(added)), key=keys.__getitem__, reverse=True):
            wanted = keys[index]
            at = high
            if high and key(kept[high - 1]) > wanted:
                at = bisect_right(kept, wanted, 0, high, key=key)
            pieces += (kept[at:high], [added[index]])
            high = at
        pieces.append(kept[:high])
        return list(chain.from_iterable(reversed(pieces)))


class _Places:
    """Where uids stand in a dict's order, as ranks from its end (negated: ascending in
    the dict's order). Only the last ``tail`` are looked at until a uid before them is
    asked for: the pods that came to a checkpoint are mostly its newest."""

    def __init__(self, pods: dict[str, Any], tail: int) -> None:
        self.pods = pods
        self.ranks = dict(zip(islice(reversed(pods), tail), count()))

    def of(self, uid: str) -> int:
        rank = self.ranks.get(uid)
        if rank is None:
            self.ranks = dict(zip(reversed(self.pods), count()))
            rank = self.ranks[uid]
        return -rank


def _handed(item: tuple[Any, ...]) -> tuple[str, str]:
    return item[POD].node, item[JUDGEMENT].verdict


def present(rows: list[Durations], place: int) -> list[float]:
    """The samples of one duration (its place in ``DURATIONS``) these pods have."""
    return [row[0][place] for row in rows if row[0][place] is not None]


def merged(base: list[float], removed: Iterable[float], added: Iterable[float]) -> list[float]:
    """``sorted(base - removed + added)``: ``base`` sorted, ``removed`` a sub-multiset
    of it. The stretches of ``base`` between the removed values are copied whole (a
    binary search for each removed value), then one merge of two sorted runs."""
    out: list[float] = []
    low = 0
    for value in sorted(removed):
        at = bisect_left(base, value, low)
        out += base[low:at]
        low = at + 1
    out += base[low:]
    out.extend(sorted(added))
    out.sort()  # two sorted runs: a merge
    return out
