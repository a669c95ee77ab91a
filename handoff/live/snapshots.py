"""The fold worker's snapshots: its state saved now and then, so a successor restores it
and folds only the stream's tail; only what a saved snapshot covers may be trimmed.

``Snapshots`` is a part of ``fold.Folder`` (a mixin: the worker's state is its own), kept
apart because it is a process matter (a forked copy serializes while the parent folds
on), not the fold's.
"""

from __future__ import annotations

import copy
import logging
import os
import signal
import time
from typing import Any

import msgspec
import redis

from handoff.core.snapshot import dump_state
from handoff.live import store

log = logging.getLogger(__name__)
SNAPSHOT_VERSION = 2
SAVER_TIMEOUT = 300.0  # seconds a background snapshot may take before it is killed


class Snapshot(msgspec.Struct):
    """What the fold worker saves: its timeline (snapshot.dump_state), the blind
    deletions it knows, and the stream id both cover."""

    version: int
    timeline: bytes
    blind: dict[str, dict[str, str]]
    cursor: str
    # What the stored views' index entries were written from (Folder.written) when the
    # snapshot was taken, and the pods changed since the last flush (Folder.dirty, in no
    # view yet): with the fold hash's cursor, a successor after a crash learns which
    # stored views are already right (docs/architecture.md, "Fold worker"). None in
    # snapshots of versions before it.
    written: dict[str, tuple[str, str, str]] | None = None
    pending: list[str] = msgspec.field(default_factory=list)


def read_snapshot(raw: bytes) -> Snapshot:
    """A stored snapshot. Data only (MessagePack), never pickle: whoever can write to
    Redis must not be able to run code in the worker. ValueError when unreadable."""
    try:
        saved = msgspec.msgpack.decode(raw, type=Snapshot)
    except msgspec.DecodeError as exc:
        raise ValueError(str(exc)) from exc
    if saved.version != SNAPSHOT_VERSION:
        raise ValueError(f"snapshot version {saved.version}")
    return saved


class Snapshots:
    """Saving and trimming, for ``fold.Folder`` (which holds every attribute used here)."""

    client: redis.Redis
    cluster: str
    cursor: str
    saver: tuple[int, str, float] | None
    last_snapshot: float
    events: int
    snapshot_events_at: int
    written: dict[str, tuple[str, str, str]]
    dirty: set[str]
    blind: dict[str, dict[str, str]]
    timeline: Any
    settings: Any
    clock: Any

    def snapshot(self) -> None:
        """Save the timeline with the id it covers; only then may the stream before it go.
        In the foreground: for the end of a fold window, and tests."""
        if self.saver is not None:
            self._reap(wait=True)
        self.last_snapshot = self.clock()
        self.snapshot_events_at = self.events
        blob = self._snapshot_blob()
        if store.save_snapshot(self.client, self.cluster, blob, self.cursor):
            self._trim(self.cursor)

    def snapshot_in_background(self) -> None:
        """The periodic snapshot, written by a forked copy of this process (as Redis's
        BGSAVE does): serializing 150,000 pods takes most of a second, which the live
        path must not wait for. The parent trims the stream once the copy has saved."""
        self.last_snapshot = self.clock()
        self.snapshot_events_at = self.events
        cursor = self.cursor
        pid = os.fork()
        if pid == 0:  # the copy: only the forking thread exists here, so no logging
            code = 1
            try:
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGURG):
                    signal.signal(sig, signal.SIG_DFL)
                os.nice(19)  # the live path in the parent comes first
                pool = copy.copy(self.client.connection_pool)
                pool.reset()  # the parent's sockets stay the parent's
                client = redis.Redis(connection_pool=pool)
                saved = store.save_snapshot(client, self.cluster, self._snapshot_blob(), cursor)
                code = 0 if saved else 3
            except BaseException:  # the exit code is the report
                code = 2
            finally:
                os._exit(code)
        self.saver = (pid, cursor, time.monotonic())

    def _reap(self, wait: bool) -> None:
        """Collect the background snapshot's copy; trim the stream when it saved."""
        assert self.saver is not None
        pid, cursor, started = self.saver
        if not wait and time.monotonic() - started > SAVER_TIMEOUT:
            os.kill(pid, signal.SIGKILL)
            log.warning("%s: background snapshot over %ds: killed", self.cluster, SAVER_TIMEOUT)
            wait = True
        try:
            done, status = os.waitpid(pid, 0 if wait else os.WNOHANG)
            code = os.waitstatus_to_exitcode(status) if done else None
        except ChildProcessError:  # reaped by someone else: the stored cursor tells
            stored = store.fold_state(self.client, self.cluster).get("snapshot")
            code = 0 if stored == cursor else 1
        if code is None:
            return
        self.saver = None
        if code == 0:
            self._trim(cursor)
        elif code != 3:  # 3: a newer snapshot was there already
            log.warning("%s: background snapshot failed (exit %s)", self.cluster, code)

    def _snapshot_blob(self) -> bytes:
        state = dump_state(self.timeline)
        return msgspec.msgpack.encode(
            Snapshot(
                SNAPSHOT_VERSION, state, self.blind, self.cursor, self.written, sorted(self.dirty)
            )
        )

    def _trim(self, cursor: str) -> None:
        """The stream keeps what is younger than the retention, at most max_events, and
        never drops an entry the snapshot (covering up to ``cursor``) does not cover."""
        age_ms = int((self.clock() - self.settings.retention_hours * 3600) * 1000)
        covered = store.stream_id_key(cursor)
        minid = min((age_ms, 0), covered)
        key = store.events_key(self.cluster)
        if minid > (0, 0):
            self.client.xtrim(key, minid=f"{minid[0]}-{minid[1]}", approximate=True)
        length = self.client.xlen(key)
        if length > self.settings.max_events:
            # Only entries the snapshot covers may go.
            first = self.client.xrange(key, count=length - self.settings.max_events)
            if first and store.stream_id_key(first[-1][0]) <= covered:
                self.client.xtrim(key, minid=first[-1][0], approximate=True)
