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
    """The simulation clock: ``now`` only advances when the next callback is due.

    The heap holds bare instants (floats compare fastest); each instant's callbacks wait in
    a list in the order they were scheduled. A callback scheduled for the instant being run
    goes to a fresh list for the same instant, so it runs after the ones already due.
    """

    def __init__(self, seed: int = 0, start: float = EPOCH) -> None:
        self.now = start
        self.start = start
        self.rng = Random(seed)
        self._random = self.rng.random
        self._heap: list[float] = []
        self._due: dict[float, list[tuple[Callable[..., object], tuple[object, ...]]]] = {}
        self._stopped = False
        self.steps = 0

    def call_at(self, when: float, fn: Callable[..., object], *args: object) -> None:
        if when < self.now:
            when = self.now
        due = self._due.get(when)
        if due is None:
            self._due[when] = [(fn, args)]
            heapq.heappush(self._heap, when)
        else:
            due.append((fn, args))

    def call_later(self, delay: float, fn: Callable[..., object], *args: object) -> None:
        # call_at's body, inlined: the busiest call of the run loop, one call fewer a timer.
        when = self.now + delay
        if when < self.now:
            when = self.now
        due = self._due.get(when)
        if due is None:
            self._due[when] = [(fn, args)]
            heapq.heappush(self._heap, when)
        else:
            due.append((fn, args))

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

    def pending(self) -> int:
        return sum(len(d) for d in self._due.values())

    def run(
        self,
        until: float | None = None,
        pace: Callable[[float], None] | None = None,
    ) -> None:
        """Run callbacks in time order until ``until`` (virtual seconds after start) or stop().

        ``pace(virtual_time)`` is called before each new instant, to sleep for live demos.
        """
        heap = self._heap
        dues = self._due
        pop = heapq.heappop
        push = heapq.heappush
        deadline = None if until is None else self.start + until
        self._stopped = False
        last = self.now
        while heap and not self._stopped:
            when = heap[0]
            if deadline is not None and when > deadline:
                self.now = deadline
                return
            if pace is not None and when > last:
                pace(when)
            last = when
            pop(heap)
            due = dues.pop(when)
            self.now = when
            self.steps += len(due)
            callbacks = iter(due)
            for fn, args in callbacks:
                fn(*args)
                if self._stopped:
                    # Put back what is left of this instant, ahead of anything added since.
                    rest = list(callbacks)
                    if rest:
                        self.steps -= len(rest)
                        later = dues.get(when)
                        if later is None:
                            push(heap, when)
                        else:
                            rest.extend(later)
                        dues[when] = rest
                    break
        if deadline is not None and not self._stopped:
            self.now = max(self.now, deadline)
