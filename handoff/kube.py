"""Reading Kubernetes objects as the API serves them: times, events of both API
groups, and the kubelet's admission messages.

Only what the timeline needs is read; nothing here keeps a whole object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

KUBELET = "kubelet"
SCHEDULER_REASONS = frozenset({"Scheduled", "FailedScheduling"})


_TIMES: dict[str, float | None] = {}
_TIMES_MAX = 200_000


def timestamp(text: Any) -> float | None:
    """Epoch seconds of an object timestamp, None when absent or unreadable.

    Object timestamps repeat a lot (1-second precision), hence the cache.
    """
    try:
        return _TIMES[text]
    except (KeyError, TypeError):
        return _parse_timestamp(text)


def _parse_timestamp(text: Any) -> float | None:
    if text.__class__ is not str or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        value = None
    else:
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = moment.timestamp()
    if len(_TIMES) >= _TIMES_MAX:
        _TIMES.clear()
    _TIMES[text] = value
    return value


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


# Field names of the two Event APIs: (regarding, message, source, first time,
# second first time, last time, count, reporting component).
_CORE_FIELDS = (
    "involvedObject",
    "message",
    "source",
    "firstTimestamp",
    "eventTime",
    "lastTimestamp",
    "count",
    "reportingComponent",
)
_EVENTS_API_FIELDS = (
    "regarding",
    "note",
    "deprecatedSource",
    "eventTime",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
    "deprecatedCount",
    "reportingController",
)


def read_event(obj: dict[str, Any]) -> EventFacts | None:
    """Normalise a core/v1 or events.k8s.io/v1 Event; None when it regards nothing."""
    meta = obj.get("metadata")
    api = obj.get("apiVersion")
    events_api = api.__class__ is str and api.startswith("events.k8s.io")
    regarding_f, message_f, source_f, first_f, first2_f, last_f, count_f, reporter_f = (
        _EVENTS_API_FIELDS if events_api else _CORE_FIELDS
    )
    regarding = obj.get(regarding_f)
    if regarding.__class__ is not dict or meta.__class__ is not dict:
        return None
    source = obj.get(source_f)
    if source.__class__ is not dict:
        source = {}
    series = obj.get("series")
    if series.__class__ is not dict:
        series = {}
    first = timestamp(obj.get(first_f)) or timestamp(obj.get(first2_f))
    last = timestamp(series.get("lastObservedTime")) or timestamp(obj.get(last_f)) or first
    count = _int(series.get("count")) or _int(obj.get(count_f)) or 1
    if events_api:
        component = _str(obj.get(reporter_f)) or _str(source.get("component"))
    else:
        component = _str(source.get("component")) or _str(obj.get(reporter_f))
    uid = meta.get("uid")
    key = uid if uid.__class__ is str and uid else f"{meta.get('namespace')}/{meta.get('name')}"
    return EventFacts(
        key,
        _str(regarding.get("kind")),
        _str(regarding.get("namespace")) or _str(meta.get("namespace")),
        _str(regarding.get("name")),
        _str(regarding.get("uid")) or None,
        _str(obj.get("reason")),
        _str(obj.get("type")) or "Normal",
        component,
        _str(source.get("host")),
        _str(obj.get(message_f)),
        first,
        last,
        count,
    )


def _str(value: Any) -> str:
    return value if value.__class__ is str else ""


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


class StatusFacts:
    """One pass over a pod's status: what the fold needs, nothing else.

    Defaults live on the class and a reading sets only what it finds: one of
    these is made for every pod update, so it must be cheap to make.
    """

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
    facts.start = timestamp(status.get("startTime"))
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
                at = timestamp(cond.get("lastTransitionTime"))
                if kind == "Ready":
                    facts.ready_at = at
                elif kind == "Initialized":
                    facts.initialized_at = at
                elif kind != "ContainersReady":
                    facts.sandbox_at = at
        elif kind == "PodScheduled":
            facts.scheduled = _str(cond.get("status"))
            facts.scheduled_at = timestamp(cond.get("lastTransitionTime"))
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
            started = timestamp(inner.get("startedAt")) or 0.0
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
    finished = timestamp(terminated.get("finishedAt"))
    if finished is not None and (facts.latest_finish is None or finished > facts.latest_finish):
        facts.latest_finish = finished
    code = terminated.get("exitCode")
    if code not in (0, None) and not facts.terminated:
        facts.terminated = _str(terminated.get("reason")) or f"exit code {code}"
