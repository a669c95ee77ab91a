"""Reading Kubernetes objects as the API serves them: times, events of both API
groups, and the kubelet's admission messages.

Only what the timeline needs is read; nothing here keeps a whole object.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import msgspec

from handoff.core import verdicts as v
from handoff.core.schema import (
    SECONDS,
    Condition,
    ContainerStatus,
    KubeObject,
    ObjectMeta,
    StateDetail,
    Status,
    Taint,
    note_second,
)

KUBELET = "kubelet"


# Absent timestamps (None) are in the cache too, so a lookup never needs a call.
_TIMES: dict[str | None, float | None] = {None: None}
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
        note_second(text, moment)  # see micro_time
    if len(_TIMES) >= _TIMES_MAX:
        _TIMES.clear()
        _TIMES[None] = None
    _TIMES[text] = value
    return value


def micro_time(text: str | None) -> float | None:
    """``timestamp`` of a time that is likely precise to the microsecond (an Event's
    ``eventTime``). Such times rarely repeat, so caching them would only crowd the
    cache; the common form ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` is read from its second
    (cached) and its microseconds. The value is the one ``datetime.timestamp()`` gives:
    whole microseconds over 10**6, correctly rounded, as Python's int division is."""
    if (
        text is not None
        and len(text) == 27
        and text[19] == "."
        and text[26] == "Z"
        and (second := SECONDS.get(text[:19])) is not None
        and (fraction := text[20:26]).isascii()
        and fraction.isdigit()
    ):
        return (second * 1_000_000 + int(fraction)) / 1_000_000
    return timestamp(text)


def seen_at(observed: float, own: float | None) -> float:
    """When a fact became true: the watch's receive time, unless the object's own
    (second-precision) timestamp shows the watcher saw it late."""
    if own is not None and own + 1.0 < observed:
        return own
    return observed


def rv_number(meta: ObjectMeta) -> int | None:
    """resourceVersion as an integer when it is one (etcd revisions are)."""
    rv = meta.resourceVersion
    return int(rv) if rv.isdigit() else None


class EventFacts(msgspec.Struct, gc=False):
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


def read_event(obj: KubeObject) -> EventFacts | None:
    """Normalise a core/v1 or events.k8s.io/v1 Event; None when it regards nothing."""
    meta = obj.metadata
    if meta is None:
        return None
    if obj.apiVersion.startswith("events.k8s.io"):
        regarding = obj.regarding
        source = obj.deprecatedSource
        first = micro_time(obj.eventTime) or timestamp(obj.deprecatedFirstTimestamp)
        last_own = obj.deprecatedLastTimestamp
        count_own = obj.deprecatedCount
        component = obj.reportingController or (source.component if source else "")
        message = obj.note
    else:  # core/v1, the common case: timestamp() inlined
        regarding = obj.involvedObject
        source = obj.source
        text = obj.firstTimestamp
        try:
            first = _TIMES[text]
        except KeyError:
            first = _parse_timestamp(text)
        if not first:
            first = micro_time(obj.eventTime)
        last_own = obj.lastTimestamp
        count_own = obj.count
        component = (source.component if source else "") or obj.reportingComponent or ""
        message = obj.message
    if regarding is None:
        return None
    series = obj.series
    if series is not None:
        last = timestamp(series.lastObservedTime) or timestamp(last_own) or first
        count = series.count or count_own or 1
    else:
        try:
            last = _TIMES[last_own] or first
        except KeyError:
            last = _parse_timestamp(last_own) or first
        count = count_own or 1
    return EventFacts(
        meta.uid or f"{meta.namespace}/{meta.name}",
        regarding.kind,
        regarding.namespace or meta.namespace,
        regarding.name,
        regarding.uid or None,
        obj.reason or "",
        obj.type or "Normal",
        component,
        source.host if source else "",
        message or "",
        first,
        last,
        count,
    )


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


class StatusFacts(msgspec.Struct, gc=False):
    """One pass over a pod's status: what the fold needs, nothing else.

    A reading sets only what it finds. One of these is made for every pod
    update, so it is a struct built in C with its defaults, not a class instance.
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


def read_status(status: Status | None) -> StatusFacts:
    """One pass over a pod's status. The facts are gathered in locals and the
    struct built once: setting a struct's attributes one by one costs more."""
    if status is None:
        return StatusFacts()
    times = _TIMES  # timestamp(), inlined: several of these per pod update
    text = status.startTime
    try:
        start = times[text]
    except KeyError:
        start = _parse_timestamp(text)
    kubelet_wrote = start is not None or bool(status.hostIP)
    scheduled = unschedulable = unschedulable_message = ""
    scheduled_at = sandbox_at = initialized_at = ready_at = None
    disruption = None
    for cond in status.conditions or ():
        kind = cond.type
        true = cond.status == "True"
        if kind in KUBELET_CONDITIONS:
            kubelet_wrote = True
            if true and kind != "ContainersReady":
                text = cond.lastTransitionTime
                try:
                    at = times[text]
                except KeyError:
                    at = _parse_timestamp(text)
                if kind == "Ready":
                    ready_at = at
                elif kind == "Initialized":
                    initialized_at = at
                else:
                    sandbox_at = at
        elif kind == "PodScheduled":
            scheduled = cond.status
            text = cond.lastTransitionTime
            try:
                scheduled_at = times[text]
            except KeyError:
                scheduled_at = _parse_timestamp(text)
            if not true:
                unschedulable = cond.reason or "Unschedulable"
                unschedulable_message = cond.message or ""
        elif kind == "DisruptionTarget":
            # False again: the disruption controller's stale-condition reset, 2 min after
            # an eviction or preemption that never went ahead (1.26+, disruption.go).
            disruption = (cond.reason or "", cond.message or "") if true else ("", "")
    containers = status.containerStatuses
    facts = StatusFacts(
        status.phase or "",
        status.reason or "",
        status.message or "",
        start,
        kubelet_wrote or bool(containers),
        scheduled,
        scheduled_at,
        unschedulable,
        unschedulable_message,
        sandbox_at,
        initialized_at,
        ready_at,
        disruption,
    )
    waiting = ""
    if status.initContainerStatuses:
        waiting = _read_containers(facts, status.initContainerStatuses, "Init:", False)
    if containers and not waiting:
        waiting = _read_containers(facts, containers, "", True)
    if waiting:
        facts.waiting = waiting
    return facts


def _read_containers(
    facts: StatusFacts, statuses: list[ContainerStatus], prefix: str, count_starts: bool
) -> str:
    """Waiting reason (a specific one over a routine one); start and finish times."""
    waiting = routine = ""
    all_started = count_starts
    latest_start = None
    for container in statuses:
        state = container.state
        if state is None:
            all_started = False
            continue
        inner = state.running or state.terminated
        if inner is not None:
            text = inner.startedAt
            try:
                started = _TIMES[text] or 0.0
            except KeyError:
                started = _parse_timestamp(text) or 0.0
            latest_start = started if latest_start is None else max(latest_start, started)
            if state.terminated is not None:
                _note_termination(facts, state.terminated)
            continue
        all_started = False
        reason = state.waiting.reason if state.waiting is not None else None
        if reason:
            if reason in ROUTINE_WAITING:
                routine = routine or reason
            else:
                waiting = waiting or reason
    if count_starts:  # the facts' defaults are None: set only what differs
        if latest_start:
            facts.latest_start = latest_start
        if all_started and latest_start is not None:
            facts.all_started_at = latest_start
    chosen = waiting or routine
    return f"{prefix}{chosen}" if chosen else ""


def _note_termination(facts: StatusFacts, terminated: StateDetail) -> None:
    finished = timestamp(terminated.finishedAt)
    if finished is not None and (facts.latest_finish is None or finished > facts.latest_finish):
        facts.latest_finish = finished
    code = terminated.exitCode
    if code not in (0, None) and not facts.terminated:
        facts.terminated = terminated.reason or f"exit code {code}"


def condition(status: Status | None, kind: str) -> Condition | None:
    """The condition of that type in a status, if any."""
    if status is None or not status.conditions:
        return None
    return next((c for c in status.conditions if c.type == kind), None)


def is_rejection(reason: str, message: str) -> bool:
    """Whether a Failed status is the kubelet refusing the pod at admission: the 1.26+
    prefix, an admission reason, or the eviction manager's admission refusal (reason
    ``Evicted`` on every version, kubelet eviction_manager.go Admit)."""
    if message.startswith(v.REJECTION_PREFIX) or v.is_admission_reason(reason):
        return True
    return reason == "Evicted" and strip_rejection(message).startswith(v.ADMISSION_EVICTION)


def strip_rejection(message: str) -> str:
    """The kubelet's own words: without "Pod was rejected: " (1.26+) or "Pod " (≤1.25)."""
    if message.startswith(v.REJECTION_PREFIX):
        return message[len(v.REJECTION_PREFIX) :]
    legacy = len(v.LEGACY_REJECTION_PREFIX)
    # "Pod Predicate X failed", "Pod Node didn't have enough resource: ..."; not the
    # node-shutdown text "Pod was rejected as the node is shutting down."
    if message.startswith(v.LEGACY_REJECTION_PREFIX) and message[legacy : legacy + 1].isupper():
        return message[legacy:]
    return message


def assigned_node(message: str) -> str:
    # "Successfully assigned default/web-1 to worker-3"
    marker = " to "
    return message.rsplit(marker, 1)[1].strip() if marker in message else ""


def taint_view(raw: Taint) -> dict[str, Any]:
    """A Node taint as the fold keeps it."""
    return {
        "key": raw.key,
        "value": raw.value or "",
        "effect": raw.effect,
        "timeAdded": raw.timeAdded,
    }
