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

from handoff.core.trace import format_time
from handoff.live import store
from handoff.live.sources.base import Gone, SourceError, WatchSettings, WatchSource
from handoff.live.sources.sink import StreamSink

log = logging.getLogger(__name__)
# Reconciled after a gap: pods and nodes, and events too (an Event gone while blind expired
# or was deleted: the fold has nothing to undo, but the stream says it is gone).
RECONCILED = frozenset({"pods", "nodes", "events"})


def relist(source: WatchSource, sink: StreamSink, resource: str) -> str:
    """List everything and emit it as ADDED. After a gap (a 410, a lost run), record the
    blind interval and the objects that vanished in it as deleted at an unknown time (a
    DELETED line flagged ``blind``)."""
    client, cluster = sink.client, sink.cluster
    state = store.stream_state(client, cluster, resource)
    items, version = source.list(resource)
    now = sink.clock()
    if state.get("last_event") and resource in RECONCILED:
        blind = blind_interval(sink, resource, float(state["last_event"]), now)
        bury_vanished(source, sink, resource, items, blind, now)
    # The listed objects replace the watch's record of what exists.
    client.delete(store.known_key(cluster, resource))
    for start in range(0, len(items), 1000):
        sink.write((("ADDED", obj) for obj in items[start : start + 1000]), observed=now)
    sink.write((), resource_version=version, observed=now)
    store.note_stream(client, cluster, resource, relisted=now, listed=len(items))
    return version


def blind_interval(sink: StreamSink, resource: str, since: float, now: float) -> dict[str, str]:
    """Note that ``resource`` was not watched from ``since`` to ``now``: the pages show
    the interval (``handoff:{c}:blind``), and whatever vanished in it carries it."""
    blind = {"stream": resource, "from": format_time(since), "to": format_time(now)}
    pipe = sink.client.pipeline(transaction=False)
    pipe.lpush(store.blind_key(sink.cluster), orjson.dumps(blind))
    pipe.ltrim(store.blind_key(sink.cluster), 0, 99)
    pipe.execute()
    return blind


def bury_vanished(
    source: WatchSource,
    sink: StreamSink,
    resource: str,
    items: list[dict[str, Any]],
    blind: dict[str, str],
    now: float,
) -> int:
    """A DELETED line, flagged with the blind interval, for each object the watch last
    saw exist that the relist no longer has. Returns how many."""
    client, cluster = sink.client, sink.cluster
    before = store.known(client, cluster, resource)
    listed = {(item.get("metadata") or {}).get("uid") for item in items}
    vanished = {uid: facts for uid, facts in before.items() if uid not in listed}
    if not vanished:
        return 0
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
    for start in range(0, len(tombstones), 1000):
        sink.write(tombstones[start : start + 1000], observed=now, extra={"blind": blind})
    log.info("%s/%s: %d objects vanished while blind", cluster, resource, len(tombstones))
    return len(tombstones)


def watch_step(
    source: WatchSource,
    sink: StreamSink,
    resource: str,
    settings: WatchSettings,
    keep_going: Callable[[], bool],
    answered: Callable[[], object] = lambda: None,
) -> str:
    """One list or one watch request. Returns "listed", "watched" or "gone".

    ``answered`` is called as soon as the API server has answered: the list is stored, or
    the watch request is open (before its first event, which may be a minute away)."""
    state = store.stream_state(sink.client, sink.cluster, resource)
    version = state.get("rv")
    if not version:
        relist(source, sink, resource)
        answered()
        return "listed"
    try:
        events = source.watch(resource, version, settings)
        answered()
        for event in events:
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
        else:
            sink.heard()  # the server ended the request (timeoutSeconds): it is alive
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


def keep_lease(
    lease: store.Lease,
    cluster: str,
    stream: str,
    stop: threading.Event,
    on_lost: Callable[[], object] = lambda: None,
) -> threading.Thread:
    """Renew the lease every ttl/3 from a thread until ``stop``, noting each renewal (so
    /healthz can tell how long a stream has had no holder); on loss set ``stop``."""

    def renew() -> None:
        while not stop.wait(lease.ttl_ms / 3000):
            try:
                held = lease.renew()
                if held:
                    store.note_stream(lease.client, cluster, stream, renewed=time.time())
            except redis.RedisError:
                continue  # keep trying until the lease would lapse anyway
            if not held:
                stop.set()
                on_lost()

    thread = threading.Thread(target=renew, daemon=True, name=f"lease {cluster}/{stream}")
    thread.start()
    return thread


class WatchLoop:
    """Steps one stream until its window closes, its lease is lost or the worker stops."""

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
        self.halt = threading.Event()  # set when the loop must end: lease lost or stop
        self.stopping = False
        self.failures = int(
            store.stream_state(sink.client, sink.cluster, resource).get("failures") or 0
        )

    def run(self, deadline: float) -> str:
        """Returns why it stopped: "window" (hand over to a successor), "lost" (someone
        else holds the lease) or "stopping" (the worker is shutting down: hand over now)."""
        lost = threading.Event()

        def on_lost() -> None:
            lost.set()
            self._lost()

        renewer = keep_lease(self.lease, self.sink.cluster, self.resource, self.halt, on_lost)
        try:
            while not self.halt.is_set() and time.monotonic() < deadline:
                self.step(lambda: not self.halt.is_set() and time.monotonic() < deadline)
        finally:
            stopped = "lost" if lost.is_set() else "stopping" if self.stopping else "window"
            self.halt.set()  # stops the renewer
            renewer.join(timeout=5)
        return stopped

    def stop(self) -> None:
        """From any thread (the worker's SIGTERM): end the watch in progress, return soon."""
        self.stopping = True
        self.halt.set()
        self.source.interrupt()

    def step(self, keep_going: Callable[[], bool]) -> None:
        try:
            watch_step(
                self.source, self.sink, self.resource, self.settings, keep_going, self._answered
            )
        except SourceError as exc:
            if self.halt.is_set():
                return  # the connection was closed on purpose (lease lost, stopping)
            self._failed(str(exc), exc.retry_after)
        except redis.RedisError as exc:
            self._failed(f"redis: {type(exc).__name__}", None)
        else:
            self._answered()

    def _answered(self) -> None:
        """The API server answered: the run of failures is over now, not when the watch
        request ends (up to HANDOFF_WATCH_SERVER_TIMEOUT later, with events flowing all
        the while: issue 21 saw a stream FAILING for minutes after it had recovered)."""
        if self.failures:
            self.failures = 0
            with contextlib.suppress(redis.RedisError):
                self.sink.recovered()
            log.info("%s/%s (%s): recovered", self.sink.cluster, self.resource, self._endpoint)

    def _failed(self, message: str, retry_after: float | None) -> None:
        # A silent connection that timed out is routine: re-watch at once, the first time.
        routine = message.startswith("watch interrupted") and self.failures == 0
        self.failures += 1
        with contextlib.suppress(redis.RedisError):
            self.sink.error(message, self.failures)
        if not routine:
            delay = self.settings.backoff(self.failures - 1, retry_after)
            log.warning(
                "%s/%s (%s): %s; retrying in %.1fs",
                self.sink.cluster,
                self.resource,
                self._endpoint,
                message,
                delay,
            )
            self.halt.wait(delay)

    @property
    def _endpoint(self) -> str:
        return getattr(self.source, "endpoint", None) or "?"

    def _lost(self) -> None:
        log.warning("%s/%s: lease lost", self.sink.cluster, self.resource)
        self.source.interrupt()
