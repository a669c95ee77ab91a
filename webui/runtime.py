"""A web process's (Daphne's) runtime settings, chosen for short waits: the garbage
collector's, and the GIL's switch interval.

Python's defaults (a young collection every 700 net new container objects) promote the
objects a page holds while it is built (decoded views, rows, the websocket messages being
sent) into the old generation, and a full collection then walks the whole heap: in the
pages bench each web process ran 20-30 full collections a minute of 70-500 ms each,
stopping every request and websocket of that process (docs/benchmarks.md). Freezing what
exists once the application is loaded (Django, the modules: ~100,000 objects that live as
long as the process) takes it out of every later collection, and a higher young threshold
lets a page's objects be freed by reference counting before a collection promotes them.
Not too high: what reference counting cannot free (Django's request is a cycle with its
session, user, messages and database wrapper: 55-70 objects a request served by Daphne,
once webui/handler.py and webui/rendering.py have broken the larger cycles) waits for the
young collection, whose pause grows with the threshold (50,000: 65-100 ms of CPU each; the
default is 10,000).
"""

from __future__ import annotations

import gc
import sys


def settle(gc_threshold: int) -> None:
    """Freeze the loaded application and set the young generation's threshold; 0 leaves
    Python's collector as it is."""
    if gc_threshold <= 0:
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(gc_threshold, middle, old)


def switch_often(interval_us: int) -> None:
    """Set the GIL's switch interval; 0 leaves Python's (5 ms).

    A web process runs two busy threads: the event loop (websocket frames, parsing and
    writing HTTP) and the thread every sync view runs on. Each Redis reply wakes the view
    thread, which must then take the GIL back; while the event loop runs Python it waits
    until the interval has passed, and a page makes tens of round trips. The fold worker's
    publisher waits the same way (handoff/live/push.py)."""
    if interval_us > 0:
        sys.setswitchinterval(interval_us / 1_000_000)
