"""The recording watcher: what a Handoff collector watching this cluster would have seen.

Three watch streams (pods, nodes, events) each deliver changes in resourceVersion order after
a seeded latency, but the streams race one another, so an Event can be observed before the
Pod change it is about. Lines come out in observed order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from handoff.core.resources import EVENTS_GROUP, RESOURCES
from handoff.sim.components.apiserver import APIServer
from handoff.sim.components.events import as_core, as_events, view
from handoff.sim.objects import Obj

Sink = Callable[[float, str, Obj], None]
STREAMS = ("pods", "nodes", "events")


class Recording:
    """Subscribes to the three streams and hands (observed, type, object) to ``sink``."""

    def __init__(
        self,
        api: APIServer,
        sink: Sink,
        *,
        latency: tuple[float, float] = (0.002, 0.030),
        events_group: str = "v1",
        bookmark_every: float | None = 60.0,
    ) -> None:
        self.api = api
        self.sink = sink
        self.latency = latency
        self.events_group = events_group
        self.lines = 0
        self._last = dict.fromkeys(STREAMS, 0.0)
        self._heap: list[tuple[float, int, str, Obj]] = []
        self._seq = 0
        self._flush_at: float | None = None
        self._gen = 0
        self._random = api.loop.rng.random
        self._subs = [api.subscribe(resource, self._handler(resource)) for resource in STREAMS]
        self._started = False
        if bookmark_every:
            api.loop.every(bookmark_every, self._bookmarks)

    def start(self) -> None:
        """The initial list: every existing object arrives as ADDED, like a fresh watcher's."""
        if self._started:
            return
        self._started = True
        for resource in STREAMS:
            items, _ = self.api.list(resource)
            for obj in items:
                self._push(resource, "ADDED", obj)

    def _handler(self, resource: str) -> Callable[[str, Obj], None]:
        # The watch fan-out calls this for every change: ``_push`` inlined, one call a change.
        loop = self.api.loop
        lo, hi = self.latency
        span = hi - lo
        random = self._random
        heap = self._heap
        push = heapq.heappush
        last = self._last
        # Events are stored in the group they were written through: convert on the way out.
        convert = (
            (as_events if self.events_group == EVENTS_GROUP else as_core)
            if (resource == "events")
            else None
        )

        def handle(type_: str, obj: Obj) -> None:
            if not self._started:
                return
            observed = loop.now + lo + span * random()
            if observed < last[resource]:
                observed = last[resource]
            last[resource] = observed
            if convert is not None:
                obj = convert(obj)
            self._seq += 1
            push(heap, (observed, self._seq, type_, obj))
            flush_at = self._flush_at
            if flush_at is None or observed < flush_at:
                self._schedule(observed)

        return handle

    def _push(self, resource: str, type_: str, obj: Obj) -> None:
        loop = self.api.loop
        lo, hi = self.latency
        observed = loop.now + lo + (hi - lo) * self._random()
        last = self._last[resource]
        if observed < last:
            observed = last
        self._last[resource] = observed
        if resource == "events":
            obj = view(obj, self.events_group)
        self._seq += 1
        heapq.heappush(self._heap, (observed, self._seq, type_, obj))
        if self._flush_at is None or observed < self._flush_at:
            self._schedule(observed)

    def _schedule(self, when: float) -> None:
        # A generation number retires superseded flushes instead of letting chains multiply.
        self._flush_at = when
        self._gen += 1
        self.api.loop.call_at(when, self._flush, self._gen)

    def _flush(self, gen: int) -> None:
        if gen != self._gen:
            return
        heap = self._heap
        now = self.api.loop.now
        sink = self.sink
        pop = heapq.heappop
        written = 0
        try:
            while heap and heap[0][0] <= now:
                observed, _, type_, obj = pop(heap)
                sink(observed, type_, obj)
                written += 1
        finally:
            self.lines += written
        self._flush_at = None
        if heap:
            self._schedule(heap[0][0])

    def drain(self) -> None:
        """Write everything still in flight (end of a run)."""
        heap = self._heap
        while heap:
            observed, _, type_, obj = heapq.heappop(heap)
            self.sink(observed, type_, obj)
            self.lines += 1
        self._flush_at = None

    def _bookmarks(self) -> None:
        if not self._started:
            return
        rv = str(self.api.rv)
        for resource in STREAMS:
            kind, version = RESOURCES[resource]
            if resource == "events" and self.events_group != "v1":
                version = self.events_group
            bookmark = {"kind": kind, "apiVersion": version, "metadata": {"resourceVersion": rv}}
            self._push(resource, "BOOKMARK", bookmark)
