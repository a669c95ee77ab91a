"""Watching one resource of one cluster, in three layers (as kopf does):

- ``watch_step``: one unit of work — list and reconcile when there is no usable version,
  else one watch request from the checkpointed version — returning what happened;
- ``WatchLoop.run``: steps until the window closes or the lease is lost, backing off with
  jitter on errors and honouring Retry-After;
- the Celery task (``handoff.tasks.watch``) holding the lease and enqueuing its successor.

Every step reads and writes its progress in Redis, so any worker can take over.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis

from handoff import store
from handoff.sources.base import Gone, SourceError, WatchSettings, WatchSource
from handoff.sources.sink import StreamSink
from handoff.trace import format_time

log = logging.getLogger(__name__)
# Objects worth reconciling after a gap: a deleted Event is just an expired one.
RECONCILED = frozenset({"pods", "nodes"})


def relist(source: WatchSource, sink: StreamSink, resource: str) -> str:
    """List everything, emit it as ADDED, and record objects that vanished while we were
    blind as deleted at an unknown time (a DELETED line flagged ``blind``)."""
    client, cluster = sink.client, sink.cluster
    items, version = source.list(resource)
    now = sink.clock()
    if resource in RECONCILED:
        _bury_vanished(source, sink, resource, items, now)
    # The listed objects replace the watch's record of what exists.
    client.delete(store.known_key(cluster, resource))
    for start in range(0, len(items), 1000):
        sink.write((("ADDED", obj) for obj in items[start : start + 1000]), observed=now)
    sink.write((), resource_version=version, observed=now)
    store.note_stream(client, cluster, resource, relisted=now, listed=len(items))
    return version


def _bury_vanished(
    source: WatchSource, sink: StreamSink, resource: str, items: list[dict[str, Any]], now: float
) -> None:
    client, cluster = sink.client, sink.cluster
    before = store.known(client, cluster, resource)
    if not before:
        return
    listed = {(item.get("metadata") or {}).get("uid") for item in items}
    vanished = {uid: facts for uid, facts in before.items() if uid not in listed}
    if not vanished:
        return
    state = store.stream_state(client, cluster, resource)
    last_seen = float(state.get("last_event") or now)
    blind = {"stream": resource, "from": format_time(last_seen), "to": format_time(now)}
    client.lpush(store.blind_key(cluster), orjson.dumps(blind))
    client.ltrim(store.blind_key(cluster), 0, 99)
    version, kind = source.api_version(resource)
    tombstones = [
        (
            "DELETED",
            {
                "kind": kind,
                "apiVersion": version,
                # The last version seen: the fold takes it as stale and only notes the end.
                "metadata": {"namespace": ns, "name": name, "uid": uid, "resourceVersion": rv},
            },
        )
        for uid, (ns, name, rv) in vanished.items()
    ]
    sink.write(tombstones, observed=now, extra={"blind": blind})
    log.info("%s/%s: %d objects vanished while blind", cluster, resource, len(tombstones))


def watch_step(
    source: WatchSource,
    sink: StreamSink,
    resource: str,
    settings: WatchSettings,
    keep_going: Callable[[], bool],
) -> str:
    """One list or one watch request. Returns "listed", "watched" or "gone"."""
    state = store.stream_state(sink.client, sink.cluster, resource)
    version = state.get("rv")
    if not version:
        relist(source, sink, resource)
        return "listed"
    try:
        for event in source.watch(resource, version, settings):
            type_, obj = event.get("type"), event.get("object") or {}
            if type_ == "BOOKMARK":
                sink.checkpoint((obj.get("metadata") or {}).get("resourceVersion", version))
            elif type_ == "ERROR":
                sink.write([(type_, obj)])
            else:
                rv = (obj.get("metadata") or {}).get("resourceVersion")
                sink.write([(type_, obj)], resource_version=rv)
            if not keep_going():
                break
    except Gone as exc:
        sink.write([("ERROR", _status_410(str(exc)))])
        # Forget the version: the next step relists and reconciles.
        sink.client.hdel(store.stream_key(sink.cluster, resource), "rv")
        return "gone"
    return "watched"


def _status_410(message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": "Expired",
        "code": 410,
    }


class WatchLoop:
    """Steps one stream until its window closes or its lease is lost."""

    def __init__(
        self,
        source: WatchSource,
        sink: StreamSink,
        resource: str,
        settings: WatchSettings,
        lease: store.Lease,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self.source = source
        self.sink = sink
        self.resource = resource
        self.settings = settings
        self.lease = lease
        self.sleep = sleep
        self.lost = threading.Event()
        self.failures = 0

    def run(self, deadline: float) -> str:
        """Returns why it stopped: "window" (hand over to a successor) or "lost"."""
        lost = threading.Event()
        renewer = self.lease.keep(lost, self._lost)
        self.lost = lost
        try:
            while not self.lost.is_set() and time.monotonic() < deadline:
                self.step(lambda: not self.lost.is_set() and time.monotonic() < deadline)
        finally:
            stopped = "lost" if self.lost.is_set() else "window"
            self.lost.set()  # stops the renewer
            renewer.join(timeout=5)
        return stopped

    def step(self, keep_going: Callable[[], bool]) -> None:
        try:
            watch_step(self.source, self.sink, self.resource, self.settings, keep_going)
            self.failures = 0
        except SourceError as exc:
            self._failed(str(exc), exc.retry_after)
        except redis.RedisError as exc:
            self._failed(f"redis: {type(exc).__name__}", None)

    def _failed(self, message: str, retry_after: float | None) -> None:
        # A silent connection that timed out is routine: re-watch at once, the first time.
        routine = message.startswith("watch interrupted") and self.failures == 0
        self.failures += 1
        with contextlib.suppress(redis.RedisError):
            self.sink.error(message)
        if not routine:
            delay = self.settings.backoff(self.failures - 1, retry_after)
            log.warning(
                "%s/%s: %s; retrying in %.1fs", self.sink.cluster, self.resource, message, delay
            )
            self.lost.wait(delay)

    def _lost(self) -> None:
        log.warning("%s/%s: lease lost", self.sink.cluster, self.resource)
        self.source.interrupt()
