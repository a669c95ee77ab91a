"""Discrete-event core: a virtual clock, a heap of timed callbacks and one seeded RNG.

Nothing here reads the wall clock; pacing for live demos is a hook the runner passes in.
Callbacks scheduled for the same instant run in the order they were scheduled.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from random import Random

# 2026-01-01T00:00:00Z: virtual time is epoch seconds, so timestamps look real.
EPOCH = 1767225600.0


class Loop:
    """The simulation clock: ``now`` only advances when the next callback is due."""

    def __init__(self, seed: int = 0, start: float = EPOCH) -> None:
        self.now = start
        self.start = start
        self.rng = Random(seed)
        self._random = self.rng.random
        self._heap: list[tuple[float, int, Callable[..., object], tuple[object, ...]]] = []
        self._seq = 0
        self._stopped = False
        self.steps = 0

    def call_at(self, when: float, fn: Callable[..., object], *args: object) -> None:
        if when < self.now:
            when = self.now
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, fn, args))

    def call_later(self, delay: float, fn: Callable[..., object], *args: object) -> None:
        self.call_at(self.now + delay, fn, *args)

    def every(self, period: float, fn: Callable[[], object], first: float | None = None) -> None:
        """Run ``fn`` every ``period`` seconds until it returns False."""

        def tick() -> None:
            if fn() is not False:
                self.call_later(period, tick)

        self.call_later(period if first is None else first, tick)

    def uniform(self, lo_hi: tuple[float, float]) -> float:
        lo, hi = lo_hi
        return lo + (hi - lo) * self._random()

    def stop(self) -> None:
        self._stopped = True

    @property
    def elapsed(self) -> float:
        return self.now - self.start

    def run(
        self,
        until: float | None = None,
        pace: Callable[[float], None] | None = None,
    ) -> None:
        """Run callbacks in time order until ``until`` (virtual seconds after start) or stop().

        ``pace(virtual_time)`` is called before each new instant, to sleep for live demos.
        """
        heap = self._heap
        pop = heapq.heappop
        deadline = None if until is None else self.start + until
        self._stopped = False
        last = self.now
        while heap and not self._stopped:
            when = heap[0][0]
            if deadline is not None and when > deadline:
                self.now = deadline
                return
            if pace is not None and when > last:
                pace(when)
            last = when
            _, _, fn, args = pop(heap)
            self.now = when
            self.steps += 1
            fn(*args)
        if deadline is not None and not self._stopped:
            self.now = max(self.now, deadline)
