"""The web yields busy cores to the fold while a fold is behind its stream.

Where the web shares cores with the fold worker and Redis (``manage.py demo``, one host),
fifty page loads in flight take every core the kernel gives them, and a fold that waits
for a core falls behind the watch it folds. Lowering the web's priority for good costs
every page its latency, all the time: a Daphne thread preempted while it holds the GIL
stops every request of its process, and the pages bench's people saw p99s of 250-650 ms
with the web's session at nice 1 to 5, against 100-220 ms at nice 0 (docs/benchmarks.md,
"The web yields to a fold behind"). So the web runs at normal priority and yields only
while a running fold is behind: once the oldest entry one has not folded is older than
``BEHIND_S``, the web's session goes to ``nice`` until every fold is back within
``CAUGHT_UP_S``.

Linux weighs sessions against each other before processes (autogroup: each service a
supervisor starts in a session of its own is one group), and a session's nice may be
raised and lowered again without privilege (a process's own nice can only be raised), so
the session's group is what changes: ``/proc/self/autogroup``, written by the process that
leads the session. Containers are weighed by their cgroups' CPU requests instead, which
this leaves alone.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import redis

from handoff.live import clusters, store

BEHIND_S = 1.0  # a fold whose oldest unfolded entry is this old is behind
CAUGHT_UP_S = 0.25  # ... and caught up again within this (one fold window is 50 ms)
AUTOGROUP = Path("/proc/self/autogroup")

log = logging.getLogger(__name__)


def folds_behind(client: redis.Redis, now: float) -> float:
    """Seconds the furthest-behind running fold is behind: the age of the oldest stream
    entry it has not folded (0 when every one is caught up). A cluster whose fold is not
    running (no lease) is left out: the web yielding cannot help it."""
    names = list(clusters.clusters(client))
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.exists(store.lease_key(name, clusters.FOLD))
            pipe.hget(store.fold_key(name), "cursor")
        replies = pipe.execute()
    running = [
        (name, _text(cursor) or "0-0")
        for name, held, cursor in zip(names, replies[::2], replies[1::2], strict=True)
        if held
    ]
    with client.pipeline(transaction=False) as pipe:
        for name, cursor in running:
            store.first_unfolded(pipe, name, cursor)
        firsts = pipe.execute()
    return max((store.unfolded_age(first, now) for first in firsts), default=0.0)


def leads_its_session() -> bool:
    """Whether this process leads its session, whose group it may then weigh."""
    return AUTOGROUP.exists() and os.getsid(0) == os.getpid()


def set_session_nice(nice: int, tries: int = 5) -> None:
    """Write this session's autogroup nice. Without CAP_SYS_ADMIN the kernel takes one such
    write a tenth of a second across the machine (EAGAIN otherwise): try again after one."""
    for attempt in range(tries):
        try:
            AUTOGROUP.write_text(str(nice))
            return
        except BlockingIOError:
            if attempt == tries - 1:
                raise
            time.sleep(0.11)


class Yielder:
    """Checked every few tenths of a second by ``manage.py serve``, which leads the web's
    session: the session at ``nice`` while a fold is behind, at 0 otherwise."""

    def __init__(self, client: redis.Redis, nice: int) -> None:
        self.client = client
        self.nice = nice
        self.yielding = False
        self.changes = 0
        self.refused = False

    def check(self, now: float | None = None) -> None:
        """One look at the folds; Redis unreachable leaves the priority as it is."""
        if self.refused:
            return
        try:
            behind = folds_behind(self.client, time.time() if now is None else now)
        except redis.RedisError:
            return
        if not self.yielding and behind > BEHIND_S:
            self._set(True, behind)
        elif self.yielding and behind <= CAUGHT_UP_S:
            self._set(False, behind)

    def _set(self, yielding: bool, behind: float) -> None:
        nice = self.nice if yielding else 0
        try:
            set_session_nice(nice)
        except BlockingIOError:
            return  # the kernel's rate limit, still: tried again at the next check
        except OSError as exc:
            # Refused for good (a read-only /proc in a container, no right to it): said
            # once, and the web no longer yields.
            log.warning("the web cannot yield to a fold behind: nice %d refused (%s)", nice, exc)
            self.refused = True
            return
        self.yielding = yielding
        self.changes += 1
        if yielding:
            log.info("a fold is %.1f s behind: the web yields (session at nice %d)", behind, nice)
        else:
            log.info("the folds caught up (%.2f s): the web back at nice 0", behind)


def _text(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode()
    return value or ""
