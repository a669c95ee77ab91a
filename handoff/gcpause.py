"""Pausing Python's cyclic garbage collector around bulk work.

The fold and the report build many small objects and keep a large state, but
make no reference cycles: reference counting frees everything, while the
collector's full passes over the growing state cost more than the work itself.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
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
