"""Watching one resource of one cluster, in three layers (as kopf does):

- ``watch_step``: one unit of work — list and reconcile when there is no usable version,
  else one watch request from the checkpointed version — returning what happened;
- ``WatchLoop.run``: steps until the window closes or the lease is lost, backing off with
  jitter on errors and honouring Retry-After;
- the Celery task (``handoff.tasks.watch``) holding the lease and enqueuing its successor.

Every step reads and writes its progress through the sink it is handed (in Redis, so any
worker can take over); nothing here knows the store's keys.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from handoff.live.sources.base import Gone, Held, Sink, SourceError, WatchSettings, WatchSource

log = logging.getLogger(__name__)
# Reconciled after a gap: pods and nodes, and events too (an Event gone while blind expired
# or was deleted: the fold has nothing to undo, but the stream says it is gone).
RECONCILED = frozenset({"pods", "nodes", "events"})


def relist(source: WatchSource, sink: Sink, resource: str) -> str:
    """List everything and emit it as ADDED. After a gap (a 410, a lost run), record the
    blind interval and the objects that vanished in it as deleted at an unknown time (a
    DELETED line flagged ``blind``)."""
    state = sink.state()
    items, version = source.list(resource)
    now = sink.clock()
    if state.get("last_event") and resource in RECONCILED:
        blind = sink.blind(float(state["last_event"]), now)
        bury_vanished(source, sink, resource, items, blind, now)
    # The listed objects replace the watch's record of what exists.
    sink.forget_known()
    for start in range(0, len(items), 1000):
        sink.write((("ADDED", obj) for obj in items[start : start + 1000]), observed=now)
    sink.write((), resource_version=version, observed=now)
    sink.note(relisted=now, listed=len(items))
    return version


def bury_vanished(
    source: WatchSource,
    sink: Sink,
    resource: str,
    items: list[dict[str, Any]],
    blind: dict[str, str],
    now: float,
) -> int:
    """A DELETED line, flagged with the blind interval, for each object the watch last
    saw exist that the relist no longer has. Returns how many."""
    before = sink.known()
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
    log.info("%s/%s: %d objects vanished while blind", sink.cluster, resource, len(tombstones))
    return len(tombstones)


def watch_step(
    source: WatchSource,
    sink: Sink,
    resource: str,
    settings: WatchSettings,
    keep_going: Callable[[], bool],
    answered: Callable[[], object] = lambda: None,
) -> str:
    """One list or one watch request. Returns "listed", "watched" or "gone".

    ``answered`` is called as soon as the API server has answered: the list is stored, or
    the watch request is open (before its first event, which may be a minute away)."""
    version = sink.state().get("rv")
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
        sink.forget_version()
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
    """Steps one stream until its window closes, its lease is lost or the worker stops."""

    def __init__(
        self,
        source: WatchSource,
        sink: Sink,
        resource: str,
        settings: WatchSettings,
        lease: Held,
        sleep: Callable[[float], Any] = time.sleep,
        reconnect: Callable[[], WatchSource] | None = None,
    ) -> None:
        self.source = source
        # Builds the source anew from the cluster's configuration after a failed call, so
        # a fixed kubeconfig (a new token, the right CA) counts from the next attempt, not
        # from the next window.
        self.reconnect = reconnect
        self.sink = sink
        self.resource = resource
        self.settings = settings
        self.lease = lease
        self.sleep = sleep
        self.halt = threading.Event()  # set when the loop must end: lease lost or stop
        self.stopping = False
        self.failures = int(sink.state().get("failures") or 0)

    def run(self, deadline: float) -> str:
        """Returns why it stopped: "window" (hand over to a successor), "lost" (someone
        else holds the lease) or "stopping" (the worker is shutting down: hand over now)."""
        lost = threading.Event()

        def on_lost() -> None:
            lost.set()
            self._lost()

        renewer = self.lease.keep(self.halt, on_lost)
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
        except self.sink.Unavailable as exc:
            self._failed(f"redis: {type(exc).__name__}", None)
        else:
            self._answered()

    def _answered(self) -> None:
        """The API server answered: the run of failures is over now, not when the watch
        request ends (up to HANDOFF_WATCH_SERVER_TIMEOUT later, with events flowing all
        the while: issue 21 saw a stream FAILING for minutes after it had recovered)."""
        if self.failures:
            self.failures = 0
            with contextlib.suppress(self.sink.Unavailable):
                self.sink.recovered()
            log.info("%s/%s (%s): recovered", self.sink.cluster, self.resource, self._endpoint)

    def _failed(self, message: str, retry_after: float | None) -> None:
        # A silent connection that timed out is routine: re-watch at once, the first time.
        routine = message.startswith("watch interrupted") and self.failures == 0
        self.failures += 1
        with contextlib.suppress(self.sink.Unavailable):
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
            self._reconnect()

    def _reconnect(self) -> None:
        if self.reconnect is None or self.halt.is_set():
            return
        try:
            self.source = self.reconnect()
        except Exception as exc:  # e.g. a kubeconfig caught mid-edit: the next failure retries
            log.warning(
                "%s/%s: cannot reload the cluster's configuration: %s",
                self.sink.cluster,
                self.resource,
                type(exc).__name__,
            )

    @property
    def _endpoint(self) -> str:
        return getattr(self.source, "endpoint", None) or "?"

    def _lost(self) -> None:
        log.warning("%s/%s: lease lost", self.sink.cluster, self.resource)
        self.source.interrupt()
