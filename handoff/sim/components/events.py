"""Event recorders (client-go tools/record and tools/events) and the two Event API views.

Kubelets and controllers write core/v1 Events: a repeat of the same (object, type, reason,
message) bumps ``count``/``lastTimestamp`` on the same object (MODIFIED), with the per-object
spam filter (burst 25, one token per 5 minutes). The scheduler writes events.k8s.io/v1
Events: the second occurrence creates ``series{count: 2}``, later ones are folded in silently
and written every 30 minutes, and a series idle for 6 minutes is finished.
"""

from __future__ import annotations

from typing import Any

from handoff.core.resources import EVENTS_GROUP
from handoff.sim.components.apiserver import APIServer, ref_of
from handoff.sim.objects import Obj, micro, stamp


def _name(api: APIServer, namespace: str, base: str) -> str:
    """``<object>.<hex unix nanos>``, bumped by one nanosecond on a clash."""
    nanos = int(api.loop.now * 1_000_000_000)
    objects = api.stores["events"].objects
    name = f"{base}.{nanos:x}"
    while (namespace, name) in objects:
        nanos += 1
        name = f"{base}.{nanos:x}"
    return name


COMBINED = "(combined from similar events): "


class CoreRecorder:
    """record.EventRecorder for one source {component, host}.

    Its EventCorrelator (client-go tools/record/events_cache.go): events that differ only
    in their message are "similar"; once 10 distinct messages of one (object, type, reason)
    arrive with less than 10 minutes between them, each further one is written as a single
    combined Event (``(combined from similar events): <latest message>``, count++).
    """

    BURST = 25
    REFILL = 300.0
    AGGREGATE_MAX = 10
    AGGREGATE_INTERVAL = 600.0

    def __init__(
        self,
        api: APIServer,
        component: str,
        host: str | None = None,
        delay: tuple[float, float] = (0.001, 0.008),
    ) -> None:
        self.api = api
        self.component = component
        self.host = host
        self.delay = delay
        self.enabled = True
        self._names: dict[tuple[Any, ...], tuple[str, str]] = {}
        self._tokens: dict[str, tuple[float, float]] = {}
        # aggregate key -> (distinct messages in insertion order, last seen)
        self._similar: dict[tuple[Any, ...], tuple[dict[str, None], float]] = {}

    def event(
        self, obj: Obj, type_: str, reason: str, message: str, field_path: str | None = None
    ) -> None:
        """Record asynchronously, as the broadcaster does."""
        if not self.enabled:
            return
        self.event_ref(ref_of(obj, field_path), type_, reason, message)

    def event_ref(self, ref: Obj, type_: str, reason: str, message: str) -> None:
        """Record against a hand-built ObjectReference (some controllers omit the uid)."""
        loop = self.api.loop
        lo, hi = self.delay
        delay = lo + (hi - lo) * loop._random()  # loop.uniform(self.delay), inlined
        loop.call_later(delay, self._write, ref, type_, reason, message)

    def _allow(self, uid: str) -> bool:
        now = self.api.loop.now
        tokens, last = self._tokens.get(uid, (float(self.BURST), now))
        tokens = min(float(self.BURST), tokens + (now - last) / self.REFILL)
        if tokens < 1.0:
            self._tokens[uid] = (tokens, now)
            return False
        self._tokens[uid] = (tokens - 1.0, now)
        return True

    def _aggregate(self, ident: str, type_: str, reason: str, message: str) -> bool:
        """EventAggregate: whether this event is to be written as the combined one."""
        key = (ident, type_, reason)
        now = self.api.loop.now
        record = self._similar.get(key)
        if record is None or now - record[1] > self.AGGREGATE_INTERVAL:
            messages: dict[str, None] = {}
        else:
            messages = record[0]
        messages[message] = None
        self._similar[key] = (messages, now)
        if len(messages) < self.AGGREGATE_MAX:
            return False
        # The set never grows past the maximum; Go drops an arbitrary one, here the oldest.
        del messages[next(iter(messages))]
        return True

    def _write(self, ref: Obj, type_: str, reason: str, message: str) -> None:
        api = self.api
        ident = ref.get("uid") or f"{ref.get('namespace')}/{ref['name']}"
        combined = self._aggregate(ident, type_, reason, message)
        if not self._allow(ident):
            return
        namespace = ref.get("namespace") or "default"
        if combined:
            message = COMBINED + message
            key: tuple[Any, ...] = (ident, COMBINED, type_, reason)
        else:
            key = (ident, ref.get("fieldPath"), type_, reason, message)
        known = self._names.get(key)
        now = api.loop.now
        if known is not None:
            current = api.find("events", *known)
            if current is not None:
                new = dict(current)
                new["count"] = current.get("count", 1) + 1
                new["lastTimestamp"] = stamp(now)
                new["message"] = message
                api.update("events", new)
                return
        source: Obj = {"component": self.component}
        if self.host:
            source["host"] = self.host
        name = _name(api, namespace, ref["name"])
        event = {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "source": source,
            "firstTimestamp": stamp(now),
            "lastTimestamp": stamp(now),
            "count": 1,
            "type": type_,
            "eventTime": None,
            "reportingComponent": "" if api.legacy_event_reporting else self.component,
            "reportingInstance": "" if api.legacy_event_reporting else self.host or "",
        }
        api.create("events", event)
        self._names[key] = (namespace, name)


class SeriesRecorder:
    """events.EventRecorder (events.k8s.io/v1), as kube-scheduler uses."""

    REFRESH = 1800.0
    FINISH = 360.0

    def __init__(
        self,
        api: APIServer,
        controller: str,
        instance: str,
        delay: tuple[float, float] = (0.001, 0.008),
        legacy_series: bool = False,
    ) -> None:
        self.api = api
        # As seen on v1.20.2 (client-go tools/events): a different note is a new Event, and
        # the first repeat's series says count 1 (the simulator's default: 2, one Event).
        self.legacy_series = legacy_series
        self.controller = controller
        self.instance = instance
        self.delay = delay
        # key -> [namespace, name, count, last observed, dirty]
        self._cache: dict[tuple[Any, ...], list[Any]] = {}
        api.loop.every(self.REFRESH, self._refresh)
        api.loop.every(self.FINISH, self._finish)

    def event(self, obj: Obj, type_: str, reason: str, action: str, note: str) -> None:
        ref = ref_of(obj)
        loop = self.api.loop
        loop.call_later(loop.uniform(self.delay), self._write, ref, type_, reason, action, note)

    def _write(self, ref: Obj, type_: str, reason: str, action: str, note: str) -> None:
        api = self.api
        now = api.loop.now
        key = (action, reason, ref["uid"], ref["name"], note if self.legacy_series else None)
        entry = self._cache.get(key)
        if entry is not None and api.find("events", entry[0], entry[1]) is not None:
            entry[2] += 1
            entry[3] = now
            if entry[2] == 2:
                self._patch_series(entry)
            else:
                entry[4] = True
            return
        namespace = ref.get("namespace") or "default"
        name = _name(api, namespace, ref["name"])
        event: Obj = {
            "kind": "Event",
            "apiVersion": EVENTS_GROUP,
            "metadata": {"name": name, "namespace": namespace},
            "eventTime": micro(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": note[:1020] + " ..." if len(note) > 1024 else note,
            "type": type_,
            "deprecatedSource": {},
            "deprecatedFirstTimestamp": None,
            "deprecatedLastTimestamp": None,
        }
        api.create("events", event)
        self._cache[key] = [namespace, name, 1, now, False]

    def _patch_series(self, entry: list[Any]) -> None:
        current = self.api.find("events", entry[0], entry[1])
        if current is None:
            return
        new = dict(current)
        count = entry[2] - 1 if self.legacy_series else entry[2]
        new["series"] = {"count": count, "lastObservedTime": micro(entry[3])}
        self.api.update("events", new)
        entry[4] = False

    def _refresh(self) -> None:
        for entry in self._cache.values():
            if entry[4]:
                self._patch_series(entry)

    def _finish(self) -> None:
        now = self.api.loop.now
        for key in [k for k, e in self._cache.items() if now - e[3] > self.FINISH]:
            entry = self._cache.pop(key)
            if entry[4]:
                self._patch_series(entry)


def as_core(event: Obj) -> Obj:
    """An Event as read through core/v1 (pkg/apis/events/v1 conversion)."""
    if event.get("apiVersion") != EVENTS_GROUP:
        return event
    out: Obj = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": event["metadata"],
        "involvedObject": event["regarding"],
        "reason": event.get("reason", ""),
        "message": event.get("note", ""),
        "source": event.get("deprecatedSource") or {},
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "type": event.get("type", ""),
        "eventTime": event.get("eventTime"),
    }
    if event.get("deprecatedCount"):
        out["count"] = event["deprecatedCount"]
    if event.get("series"):
        out["series"] = event["series"]
    if event.get("action"):
        out["action"] = event["action"]
    out["reportingComponent"] = event.get("reportingController", "")
    out["reportingInstance"] = event.get("reportingInstance", "")
    return out


def as_events(event: Obj) -> Obj:
    """An Event as read through events.k8s.io/v1."""
    if event.get("apiVersion") == EVENTS_GROUP:
        return event
    out: Obj = {
        "kind": "Event",
        "apiVersion": EVENTS_GROUP,
        "metadata": event["metadata"],
        "eventTime": event.get("eventTime"),
    }
    if event.get("series"):
        out["series"] = event["series"]
    out["reportingController"] = event.get("reportingComponent", "")
    out["reportingInstance"] = event.get("reportingInstance", "")
    if event.get("action"):
        out["action"] = event["action"]
    out["reason"] = event.get("reason", "")
    out["regarding"] = event["involvedObject"]
    out["note"] = event.get("message", "")
    out["type"] = event.get("type", "")
    out["deprecatedSource"] = event.get("source") or {}
    out["deprecatedFirstTimestamp"] = event.get("firstTimestamp")
    out["deprecatedLastTimestamp"] = event.get("lastTimestamp")
    if event.get("count"):
        out["deprecatedCount"] = event["count"]
    return out


def view(event: Obj, group: str) -> Obj:
    return as_events(event) if group == EVENTS_GROUP else as_core(event)
