"""Reading Kubernetes objects as the API serves them: times, events of both API
groups, and the kubelet's admission messages.

Only what the timeline needs is read; nothing here keeps a whole object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

KUBELET = "kubelet"
SCHEDULER_REASONS = frozenset({"Scheduled", "FailedScheduling"})


@lru_cache(maxsize=131072)
def timestamp(text: str | None) -> float | None:
    """Epoch seconds of an object timestamp, None when absent or unreadable.

    Object timestamps repeat a lot (1-second precision), hence the cache.
    """
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def seen_at(observed: float, own: float | None) -> float:
    """When a fact became true: the watch's receive time, unless the object's own
    (second-precision) timestamp shows the watcher saw it late."""
    if own is not None and own + 1.0 < observed:
        return own
    return observed


def rv_number(obj_meta: dict[str, Any]) -> int | None:
    """resourceVersion as an integer when it is one (etcd revisions are)."""
    rv = obj_meta.get("resourceVersion")
    if isinstance(rv, str) and rv.isdigit():
        return int(rv)
    if isinstance(rv, int):
        return rv
    return None


@dataclass(slots=True)
class EventFacts:
    """An Event of either API group, reduced to what a timeline shows."""

    key: str
    kind: str  # of the object it regards
    namespace: str
    name: str
    uid: str | None
    reason: str
    type: str
    component: str
    host: str
    message: str
    first: float | None
    last: float | None
    count: int


def read_event(obj: dict[str, Any]) -> EventFacts | None:
    """Normalise a core/v1 or events.k8s.io/v1 Event; None when it regards nothing."""
    meta = obj.get("metadata") or {}
    if not isinstance(meta, dict):
        return None
    if str(obj.get("apiVersion", "")).startswith("events.k8s.io"):
        return _read_events_api(obj, meta)
    return _read_core_event(obj, meta)


def _read_core_event(obj: dict[str, Any], meta: dict[str, Any]) -> EventFacts | None:
    regarding = obj.get("involvedObject")
    if not isinstance(regarding, dict):
        return None
    source = obj.get("source") if isinstance(obj.get("source"), dict) else {}
    series = obj.get("series") if isinstance(obj.get("series"), dict) else {}
    first = timestamp(_str(obj.get("firstTimestamp"))) or timestamp(_str(obj.get("eventTime")))
    last = (
        timestamp(_str(series.get("lastObservedTime")))
        or timestamp(_str(obj.get("lastTimestamp")))
        or first
    )
    count = _int(series.get("count")) or _int(obj.get("count")) or 1
    component = _str(source.get("component")) or _str(obj.get("reportingComponent"))
    return _facts(obj, meta, regarding, component, _str(source.get("host")), first, last, count)


def _read_events_api(obj: dict[str, Any], meta: dict[str, Any]) -> EventFacts | None:
    regarding = obj.get("regarding")
    if not isinstance(regarding, dict):
        return None
    source = obj.get("deprecatedSource") if isinstance(obj.get("deprecatedSource"), dict) else {}
    series = obj.get("series") if isinstance(obj.get("series"), dict) else {}
    first = timestamp(_str(obj.get("eventTime"))) or timestamp(
        _str(obj.get("deprecatedFirstTimestamp"))
    )
    last = (
        timestamp(_str(series.get("lastObservedTime")))
        or timestamp(_str(obj.get("deprecatedLastTimestamp")))
        or first
    )
    count = _int(series.get("count")) or _int(obj.get("deprecatedCount")) or 1
    component = _str(obj.get("reportingController")) or _str(source.get("component"))
    host = _str(source.get("host"))
    return _facts(obj, meta, regarding, component, host, first, last, count, "note")


def _facts(
    obj: dict[str, Any],
    meta: dict[str, Any],
    regarding: dict[str, Any],
    component: str,
    host: str,
    first: float | None,
    last: float | None,
    count: int,
    message_field: str = "message",
) -> EventFacts:
    key = _str(meta.get("uid")) or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return EventFacts(
        key=key,
        kind=_str(regarding.get("kind")),
        namespace=_str(regarding.get("namespace")) or _str(meta.get("namespace")),
        name=_str(regarding.get("name")),
        uid=_str(regarding.get("uid")) or None,
        reason=_str(obj.get("reason")),
        type=_str(obj.get("type")) or "Normal",
        component=component,
        host=host,
        message=_str(obj.get(message_field)),
        first=first,
        last=last,
        count=count,
    )


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


_RESOURCE_MESSAGE = re.compile(
    r"Node didn't have enough resource: (?P<resource>[^,]+), requested: (?P<requested>-?\d+),"
    r" used: (?P<used>-?\d+), capacity: (?P<capacity>-?\d+)"
)


def parse_admission_message(message: str) -> dict[str, Any] | None:
    """requested/used/capacity from the kubelet's OutOf<resource> message."""
    match = _RESOURCE_MESSAGE.search(message or "")
    if not match:
        return None
    return {
        "resource": match["resource"].strip(),
        "requested": int(match["requested"]),
        "used": int(match["used"]),
        "capacity": int(match["capacity"]),
    }


KUBELET_CONDITIONS = frozenset(
    {"PodReadyToStartContainers", "PodHasNetwork", "Initialized", "Ready", "ContainersReady"}
)
ROUTINE_WAITING = frozenset({"ContainerCreating", "PodInitializing"})


@dataclass(slots=True)
class StatusFacts:
    """One pass over a pod's status: what the fold needs, nothing else."""

    phase: str = ""
    reason: str = ""
    message: str = ""
    start: float | None = None
    kubelet_wrote: bool = False
    scheduled: str = ""  # PodScheduled status: "True", "False" or ""
    scheduled_at: float | None = None
    unschedulable: str = ""
    unschedulable_message: str = ""
    sandbox_at: float | None = None
    initialized_at: float | None = None
    ready_at: float | None = None
    disruption: tuple[str, str] | None = None
    all_started_at: float | None = None
    latest_start: float | None = None
    latest_finish: float | None = None
    waiting: str = ""
    terminated: str = ""


def read_status(status: Any) -> StatusFacts:
    facts = StatusFacts()
    if status.__class__ is not dict:
        return facts
    facts.phase = _str(status.get("phase"))
    facts.reason = _str(status.get("reason"))
    facts.message = _str(status.get("message"))
    facts.start = timestamp(_str(status.get("startTime")))
    facts.kubelet_wrote = facts.start is not None or bool(status.get("hostIP"))
    conditions = status.get("conditions")
    if conditions.__class__ is list:
        _read_conditions(facts, conditions)
    init = status.get("initContainerStatuses")
    if init.__class__ is list and init:
        facts.waiting = _read_containers(facts, init, "Init:", count_starts=False)
    containers = status.get("containerStatuses")
    if containers.__class__ is list and containers:
        facts.kubelet_wrote = True
        facts.waiting = facts.waiting or _read_containers(facts, containers, "", count_starts=True)
    return facts


def _read_conditions(facts: StatusFacts, conditions: list[Any]) -> None:
    for cond in conditions:
        if cond.__class__ is not dict:
            continue
        kind = cond.get("type")
        true = cond.get("status") == "True"
        if kind in KUBELET_CONDITIONS:
            facts.kubelet_wrote = True
            if true:
                at = timestamp(_str(cond.get("lastTransitionTime")))
                if kind == "Ready":
                    facts.ready_at = at
                elif kind == "Initialized":
                    facts.initialized_at = at
                elif kind != "ContainersReady":
                    facts.sandbox_at = at
        elif kind == "PodScheduled":
            facts.scheduled = _str(cond.get("status"))
            facts.scheduled_at = timestamp(_str(cond.get("lastTransitionTime")))
            if not true:
                facts.unschedulable = _str(cond.get("reason")) or "Unschedulable"
                facts.unschedulable_message = _str(cond.get("message"))
        elif kind == "DisruptionTarget" and true:
            facts.disruption = (_str(cond.get("reason")), _str(cond.get("message")))


def _read_containers(
    facts: StatusFacts, statuses: list[Any], prefix: str, count_starts: bool
) -> str:
    """Waiting reason (a specific one over a routine one); start and finish times."""
    waiting = routine = ""
    all_started = count_starts
    latest_start = None
    for container in statuses:
        state = container.get("state") if container.__class__ is dict else None
        if state.__class__ is not dict:
            all_started = False
            continue
        running = state.get("running")
        terminated = state.get("terminated")
        if running.__class__ is dict or terminated.__class__ is dict:
            inner = running if running.__class__ is dict else terminated
            started = timestamp(_str(inner.get("startedAt"))) or 0.0
            latest_start = started if latest_start is None else max(latest_start, started)
            if terminated.__class__ is dict:
                _note_termination(facts, terminated)
            continue
        all_started = False
        inner = state.get("waiting")
        if inner.__class__ is dict and inner.get("reason"):
            reason = _str(inner.get("reason"))
            if reason in ROUTINE_WAITING:
                routine = routine or reason
            else:
                waiting = waiting or reason
    if count_starts:
        facts.latest_start = latest_start or None
        facts.all_started_at = latest_start if all_started else None
    chosen = waiting or routine
    return f"{prefix}{chosen}" if chosen else ""


def _note_termination(facts: StatusFacts, terminated: dict[str, Any]) -> None:
    finished = timestamp(_str(terminated.get("finishedAt")))
    if finished is not None and (facts.latest_finish is None or finished > facts.latest_finish):
        facts.latest_finish = finished
    code = terminated.get("exitCode")
    if code not in (0, None) and not facts.terminated:
        facts.terminated = _str(terminated.get("reason")) or f"exit code {code}"
