"""Pausing Python's cyclic garbage collector around bulk work.

The fold and the report build many small objects and keep a large state, but
make no reference cycles: reference counting frees everything, while the
collector's full passes over the growing state cost more than the work itself.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Tenure:
    """Keeps a long-running loop's old objects out of the collector's full passes.

    A fold worker holds every pod of its cluster for minutes. Each full collection walks
    all of them (about 200 ms at 40,000 pods), and while the state grows one comes every
    few seconds: a stall in the live path each time. ``settle`` (called where a pause
    costs nothing, right after a flush) collects what is young, at most every ``interval``
    seconds, and freezes what survived (``gc.freeze``), so later collections skip it and
    stay as short as the young part. Garbage cycles that reach frozen objects wait until
    ``release`` unfreezes and collects everything once, at the end of the loop.

    The settle's collection stops short of the oldest generation on purpose. A full one
    also un-tracks every dict whose values are all atomic (CPython 3.11, gcmodule.c
    ``untrack_dicts``); the fold's per-pod dicts of short tuples (``Folder.written``,
    ``Search.ranks``) are such dicts once their tuples are un-tracked, and the next tuple
    stored tracks them again as young objects, walked whole by the next collections of
    every generation. At 100,000 pods that was 12-28 ms of CPU in each settle, once a
    second, in the fold's live path (docs/benchmarks.md, "The fold's collector").
    Collected from the middle generation, they are frozen tracked and stay frozen. The
    price: a garbage cycle already in the oldest generation at a settle is frozen too and
    waits for ``release`` (the full settles measured in the pages bench freed none).
    """

    def __init__(self, interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.clock = clock
        self.last = clock()
        self.settled = 0

    def settle(self) -> None:
        now = self.clock()
        if now - self.last < self.interval:
            return
        gc.collect(1)
        gc.freeze()
        self.last = now
        self.settled += 1

    def adopt(self) -> None:
        """Freeze what was built with the collector paused (``paused_gc``), uncollected: it
        holds no cycles, and its first collection would walk all of it (0.3 to 0.8 s after
        a restore of 200,000 pods). ``release`` collects it with the rest."""
        gc.freeze()
        self.last = self.clock()
        self.settled += 1

    def release(self) -> None:
        if self.settled:
            gc.unfreeze()
            gc.collect()
            self.settled = 0
