"""A recorded trace folded up to any moment, quickly, for the replay pages.

The trace's events are kept in memory in observed order. While they are folded once from
start to end, the timeline is frozen every ``every`` events (``checkpoints.freeze``: pods
unchanged since the checkpoint before are shared with it). Seeking to a time thaws the
nearest checkpoint at or before it (a dict copy, plus copies of the pods the events
folded touch) and folds only the events between, so moving a slider costs at most ``every``
events and a dict copy, not the trace nor a deserialised timeline.

Events are ordered by their observed time (a stable sort: within one watch the order is
kept). The fold does not depend on how the pod, node and event watches interleave, so the
state at ``at`` equals ``timeline.fold(events, until=at)``.
"""

from __future__ import annotations

import bisect
import gc
import math
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from handoff.core.gcpause import paused_gc
from handoff.core.timeline import Timeline
from handoff.core.trace import LineError, WatchEvent
from handoff.interop.importers import open_events
from handoff.offline.checkpoints import Checkpoint, copy_touched, freeze, thaw
from handoff.offline.judging import (
    Delta,
    Durations,
    Ranking,
    Steady,
    SteadyChain,
    SteadyJudging,
)

# At most this many checkpoints are kept, whatever the trace's length: memory stays
# bounded by (checkpoints x state size), seeking by (events / checkpoints) folds.
MAX_CHECKPOINTS = 64


class EmptyTrace(ValueError):
    """The file holds no watch event the fold can use."""


class ReplayState:
    """One trace, foldable to any time between its first and last event."""

    def __init__(
        self,
        events: Iterable[WatchEvent],
        cluster: str | None = None,
        errors: Iterable[LineError] = (),
        every: int = 5000,
        stuck_after: float = 60.0,
    ) -> None:
        """``stuck_after``: the threshold the pages judge with, whose judgements of steady
        pods are worked out while the trace is loaded (others judge every pod)."""
        ordered = sorted(events, key=WatchEvent.time)
        if not ordered:
            raise EmptyTrace("the trace has no watch events")
        self.events = ordered
        self.times = [event.time() for event in ordered]
        self.cluster = cluster
        self.errors = list(errors)
        self.skipped: dict[str, int] = {}
        self.every = max(every, math.ceil(len(ordered) / MAX_CHECKPOINTS))
        # checkpoints[i] is the state after the first i * every events.
        self.checkpoints: list[Checkpoint] = []
        self.steady: list[Steady] = []  # per checkpoint (offline/judging.py)
        # The durations of the checkpoints' steady pods, by the frozen pod's id: worked
        # out while loading; those pods live as long as the state, so their ids are
        # theirs alone (what the replay's fleet page caches by, webui/detail/replayed.py).
        self.frozen_durations: dict[int, Durations] = {}
        durations = self.frozen_durations
        self._chain = SteadyChain(stuck_after, durations)
        self._judging = SteadyJudging(stuck_after, durations)
        self._lock = threading.RLock()
        self._working: Timeline | None = None
        self._position = 0
        self._moves = 0  # counts changes of the working timeline (see judged_at)
        self._judged: tuple[tuple[int, float, float], tuple[dict, Ranking, Delta | None]] | None
        self._judged = None
        self._ranked: list[Any] | None = None  # the kept pass's ranking, once asked for
        self._build()
        # The fold ran with the collector paused: everything it made is young. Its first
        # full collection (about 1.5 s at 500,000 events) would fall on a page request;
        # made here, while loading, it leaves them old and the requests' ones short.
        gc.collect()
        self._slot = 0  # the checkpoint the working timeline was thawed from

    @classmethod
    def from_file(
        cls, path: str | Path, every: int = 5000, stuck_after: float = 60.0
    ) -> ReplayState:
        """Any input the importers read: trace v1, kubectl output, an audit log."""
        reader = open_events(path)
        events = list(reader)
        cluster = reader.header.cluster if reader.header else None
        state = cls(events, cluster, reader.errors, every, stuck_after)
        state.skipped = dict(reader.skipped)
        return state

    @property
    def start(self) -> float:
        return self.times[0]

    @property
    def end(self) -> float:
        return self.times[-1]

    def _build(self) -> None:
        timeline = Timeline(self.cluster)
        touched: dict[str, int] = {}  # uid: the index of the slot's first event touching it
        with paused_gc():
            for index, event in enumerate(self.events):
                if index % self.every == 0:
                    self._checkpoint(timeline, index, touched)
                    touched = {}
                pod = timeline.apply(event)
                if pod is not None and pod.uid not in touched:
                    touched[pod.uid] = index
            self._close(self.checkpoints[-1], timeline, touched)
        # Not kept as the working timeline: seeks thaw checkpoints, whose steady pods'
        # judgements hold (offline/judging.py); the live timeline's pods are not those.
        del self._chain  # what it carries from slot to slot

    def _checkpoint(self, timeline: Timeline, index: int, touched: dict[str, int]) -> None:
        before = self.checkpoints[-1] if self.checkpoints else None
        if before is not None:
            self._close(before, timeline, touched)
        self.checkpoints.append(freeze(timeline, index, before, touched))

    def _close(self, checkpoint: Checkpoint, timeline: Timeline, touched: dict[str, int]) -> None:
        """The checkpoint's slot folded (``timeline`` is at its end): what it changed,
        and the checkpoint's steady pods for the times whose seek thaws it."""
        checkpoint.touched = frozenset(touched)
        checkpoint.first_touched = tuple(touched)
        checkpoint.first_touch_at = tuple(touched.values())
        checkpoint.removed = frozenset(checkpoint.pods.keys() - timeline.pods.keys())
        position = checkpoint.position
        low = self.times[position - 1] if position else -math.inf
        end = position + self.every  # the next checkpoint's: a seek here is before it
        high = self.times[end - 1] if end < len(self.times) else math.inf
        self.steady.append(self._chain.add(checkpoint, low, high))

    def count_until(self, at: float) -> int:
        """How many events were observed at or before ``at``."""
        return bisect.bisect_right(self.times, at)

    @contextmanager
    def seek(self, at: float) -> Iterator[Timeline]:
        """The timeline at ``at``, held for the caller alone until the block ends."""
        with self._lock:
            yield self.timeline_at(at)

    def timeline_at(self, at: float) -> Timeline:
        """The timeline as it was at ``at`` (every event observed up to then, folded).

        The returned timeline is shared until the next call: read it, don't change it.
        """
        target = self.count_until(at)
        with self._lock:
            slot = min(target // self.every, len(self.checkpoints) - 1)
            base = slot * self.every
            working = self._working
            if working is None or not base <= self._position <= target:
                with paused_gc():
                    working = thaw(self.checkpoints[slot], copied=False)
                self._slot, self._position = slot, base
            if working is not self._working or self._position != target:
                self._moves += 1
            with paused_gc():
                copy_touched(working, self.checkpoints[slot], self._position, target)
                for event in self.events[self._position : target]:
                    working.apply(event)
            self._working, self._position = working, target
            return working

    def judged_at(self, at: float, stuck_after: float) -> tuple[dict[str, Any], list[Any]]:
        """``report.judged`` of the timeline at ``at``: one pass over every pod, kept
        until the working timeline moves, so a board page's summary and pod list (two
        requests at one time) make it once; in it, the checkpoint's steady pods
        are not judged again (``SteadyJudging``). Call inside ``seek(at)``."""
        with self._lock:
            head, ranking, _delta = self._judge(at, stuck_after)
            if self._ranked is None:
                with paused_gc():
                    self._ranked = ranking()
            return head, self._ranked

    def judged_delta(self, at: float, stuck_after: float) -> Delta | None:
        """How ``judged_at``'s pass differs from its checkpoint's steady pods (None when
        it judged every pod), for pages that keep aggregates of the steady pods: the
        pass without its ranking of every pod, which they do not read. Call inside
        ``seek(at)``."""
        with self._lock:
            return self._judge(at, stuck_after)[2]

    def _judge(self, at: float, stuck_after: float) -> tuple[dict, Ranking, Delta | None]:
        """The judging pass at ``at``, kept until the working timeline moves."""
        timeline = self.timeline_at(at)
        key = (self._moves, at, stuck_after)
        if self._judged is None or self._judged[0] != key:
            self._judged = None  # the old pass's pods are not kept meanwhile
            self._ranked = None
            slot = self._slot
            judged = self._judging.judged(
                timeline, self.checkpoints[slot], self.steady[slot], at, stuck_after
            )
            self._judged = (key, judged)
        return self._judged[1]
