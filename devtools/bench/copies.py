"""The fold's snapshot copies seen from outside, for the pages bench (issue 19).

Every 20,000 events (``HANDOFF_SNAPSHOT_EVENTS``) the fold worker forks a copy of itself
that serializes its state at nice 19 and writes it into Redis in 1 MB pieces
(``handoff.live.snapshots``): the fork pauses the fold, the pieces queue in Redis beside
every page's reads. ``CopyWatch`` notes when each copy ran, from /proc (a process of the
worker's process group, or a child of one, that was not there when the watch began: a
copy may leave the group for a session of its own), so a phase's slowest
pages and frames can be set against them: if the tail lives in the copies, more of it
overlaps one than the copies' share of the phase.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from devtools.devstack import live_processes, start_time

COPY_TICK = 0.05  # seconds between looks at the worker's process group

Span = tuple[float, float]  # wall-clock seconds: from, to


class CopyWatch:
    """While entered: the spans during which a new member of the group led by ``leader``
    ran (its start and end to within ``COPY_TICK``)."""

    def __init__(self, leader: int) -> None:
        self.group = (leader, start_time(leader) or 0)
        self.known: set[int] = set()
        self.running: dict[int, float] = {}
        self.spans: list[Span] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="copy-watch", daemon=True)

    def __enter__(self) -> CopyWatch:
        self.known = family(*self.group)  # the worker and its pool process
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.close(time.time())

    def _watch(self) -> None:
        while not self._stop.wait(COPY_TICK):
            self.look(family(*self.group), time.time())

    def close(self, now: float) -> None:
        """End the spans of copies still running ``now``: the phase is over."""
        self.spans.extend((began, now) for began in self.running.values())
        self.running.clear()
        self.spans.sort()

    def look(self, members: set[int], now: float) -> None:
        """One look at the group: new members start a span, vanished ones end theirs."""
        copies = members - self.known
        for pid in copies - self.running.keys():
            self.running[pid] = now
        for pid in self.running.keys() - copies:
            self.spans.append((self.running.pop(pid), now))


def family(leader: int, leader_started: int) -> set[int]:
    """Live processes of the group ``leader`` leads, and their children wherever they
    are (``devstack.group_members`` and one more generation)."""
    if start_time(leader) not in (None, leader_started):
        return set()  # the pid was recycled: not our group
    processes = live_processes()
    members = {pid for pid, (_, group) in processes.items() if group == leader}
    return members | {pid for pid, (parent, _) in processes.items() if parent in members}


def overlapping(intervals: Iterable[Span], spans: list[Span]) -> int:
    """How many of ``intervals`` share a moment with one of ``spans``."""
    return sum(any(a < end and began < b for began, end in spans) for a, b in intervals)


def copies_summary(spans: list[Span], window: Span) -> dict[str, Any]:
    """The copies that ran in ``window``: how many, their median length and the share of
    the window one was running."""
    began, ended = window
    inside = [(max(a, began), min(b, ended)) for a, b in spans if a < ended and b > began]
    lengths = sorted(b - a for a, b in inside)
    busy = sum(lengths)
    return {
        "n": len(inside),
        "s_p50": round(lengths[len(lengths) // 2], 2) if lengths else None,
        "share": round(busy / (ended - began), 3) if ended > began else 0.0,
    }


def copies_note(copies: dict[str, Any] | None, slow: int | None, of: int) -> str:
    """``; 6 snapshot copies ran 9 % of the time; 12 of the slowest 50 overlapped one``."""
    if not copies or slow is None:
        return ""
    return (
        f"; {copies['n']} snapshot copies ran {100 * copies['share']:.0f} % of the time, "
        f"{slow} of these {of} overlapped one"
    )
