"""One pod as the CLI, the API and the pages show it: its view (verdict, explanation,
milestones, stage bars, events, changes in words), and the order pods are listed in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from handoff.core import verdicts as v
from handoff.core.durations import pod_duration, pod_durations
from handoff.core.explain import Context, explain
from handoff.core.facts import parse_admission_message
from handoff.core.judge import Judgement
from handoff.core.podstate import (
    ACK,
    BOUND,
    CREATED,
    DELETED,
    NO_EXTRA,
    RUNNING,
    SLOTS,
    EventRecord,
    PodState,
)
from handoff.core.timeline import Timeline
from handoff.core.trace import format_time


class _Instants(dict[float | None, str | None]):
    """Instants already written in RFC 3339. The same instants recur in a pod's
    milestones, stages and changes: a cache that spans a few pods catches them; one
    spanning every pod only costs memory, so it starts again when full. A dict read
    (``__missing__`` on a miss) costs less than an ``lru_cache`` hit on a float."""

    def __missing__(self, value: float | None) -> str | None:
        if len(self) >= _INSTANTS_KEPT:
            self.clear()
        text = None if value is None else format_time(value)
        self[value] = text
        return text


_INSTANTS_KEPT = 1 << 12
iso: Callable[[float | None], str | None] = _Instants().__getitem__
"""An instant (epoch seconds) in RFC 3339 (``trace.format_time``), None for None."""


def pod_view(
    timeline: Timeline,
    pod: PodState,
    now: float,
    stuck_after: float = 60.0,
    judgement: Judgement | None = None,
    bars: list[StageBar] | None = None,
) -> dict[str, Any]:
    """Everything the CLI, the API and the pod page show about one pod (``judgement``:
    the pod's, when the caller has just judged it at ``now``; ``bars``: its
    ``stage_bars`` at ``now``, when the caller keeps them too)."""
    if judgement is None:
        judgement = timeline.judge(pod, now, stuck_after)
    binding = timeline.binding(pod)
    m = pod.milestones
    rejection = None
    message = ""
    if pod.extra is not None:  # only pods with rare facts have a message to explain
        message = pod.unschedulable_message
        if judgement.verdict == v.REJECTED:
            reason, message = pod.rejection or (judgement.reason or "", pod.status_message)
            rejection = {"reason": reason, "message": message}
            parsed = parse_admission_message(message)
            if parsed:
                rejection.update(parsed)
        elif judgement.verdict == v.EVICTED and pod.evicted_event is not None:
            message = pod.evicted_event[2]
        elif judgement.verdict == v.EVICTED and pod.status_reason == "Evicted":
            message = pod.status_message
    elif judgement.verdict == v.REJECTED:
        rejection = {"reason": judgement.reason or "", "message": ""}
    bound = m[BOUND] if m[BOUND] is not None else m[CREATED]
    window = judgement.podgc_window
    extra = pod.extra or NO_EXTRA  # the rare facts, read directly
    ctx = Context(
        node=pod.node,
        binding=binding,
        message=message,
        resources=parse_admission_message(message) if rejection else None,
        owner_kind=pod.owner[0] if pod.owner else "",
        since_bound=None if bound is None else max(0.0, now - bound),
        podgc_from=format_time(window[0]) if window else "",
        podgc_to=format_time(window[1]) if window else "",
        node_lost_at=iso(judgement.node_lost_at) or "",
        acked=m[ACK] is not None,
        ran=m[RUNNING] is not None,
        finalizers=extra.finalizers,
        deletion_deadline=iso(extra.deletion_deadline) or "",
    )
    known = [t for t in m if t is not None]
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": None if pod.uid.startswith("name:") else pod.uid,
        "node": pod.node or None,
        "node_exists": judgement.node_exists,
        "binding": binding,
        "owner": owner_view(timeline, pod),
        "verdict": judgement.verdict,
        "reason": judgement.reason,
        "explanation": explain(judgement.verdict, judgement.reason, ctx),
        "since": iso(max(known)) if known else None,
        "milestones": dict(zip(v.MILESTONES, map(iso, m), strict=True)),
        "durations": pod_durations(pod),
        "stages": stage_dicts(stage_bars(m, now) if bars is None else bars),
        "rejection": rejection,
        "podgc": {"earliest": iso(window[0]), "latest": iso(window[1])} if window else None,
        "events": [_event_view(record) for record in _sorted_events(pod)] if pod.events else [],
        "changes": [{"at": iso(t), "what": text} for t, text in describe_changes(pod)],
    }


def owner_view(timeline: Timeline, pod: PodState) -> dict[str, Any] | None:
    """The pod's controller, and the workload it is grouped under when that is another
    (a Deployment behind its ReplicaSet: ``owners.OwnerBook.workload``)."""
    if pod.owner is None:
        return None
    view: dict[str, Any] = {"kind": pod.owner[0], "name": pod.owner[1]}
    workload = timeline.owners.workload(pod.namespace, pod.owner)
    if workload is not None and workload != pod.owner:
        view["workload"] = {"kind": workload[0], "name": workload[1]}
    return view


def row_view(timeline: Timeline, pod: PodState, judgement: Judgement) -> dict[str, Any]:
    """The part of ``pod_view`` a one-line-per-pod table shows (the terminal's): the same
    values, without the explanation, stage bars, events and changes that cost most of a
    view and that a table of 100,000s of pods never prints."""
    known = [t for t in pod.milestones if t is not None]
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": None if pod.uid.startswith("name:") else pod.uid,
        "node": pod.node or None,
        "node_exists": judgement.node_exists,
        "binding": timeline.binding(pod),
        "owner": owner_view(timeline, pod),
        "verdict": judgement.verdict,
        "reason": judgement.reason,
        "since": iso(max(known)) if known else None,
        "durations": {"create_to_running": pod_duration(pod, "create_to_running")},
    }


# What proves a pod is past every stage before "running": a stage whose own end never
# came closes at the first of these. On 1.28 and earlier no PodReadyToStartContainers
# (PodHasNetwork) condition is written by default (on by default from 1.29, PR #119659),
# so "sandbox & network" has no end of its own there.
_MOVED_ON = tuple(SLOTS[name] for name in ("containers_started", "running", "ready", "finished"))
_BEFORE_RUNNING = tuple(stage.name for stage in v.STAGES).index("running")
_STAGE_SLOTS = tuple(
    (
        stage.name,
        tuple(SLOTS[s] for s in stage.starts),
        tuple(SLOTS[e] for e in stage.ends),
        _MOVED_ON if position < _BEFORE_RUNNING else (),
    )
    for position, stage in enumerate(v.STAGES)
)


# A stage bar in epoch seconds: (name, start, end, open).
StageBar = tuple[str, float, float, bool]


def stages(milestones: Sequence[float | None], now: float) -> list[dict[str, Any]]:
    """The stage bars between milestones as a view shows them (``stage_bars``)."""
    return stage_dicts(stage_bars(milestones, now))


def stage_dicts(bars: list[StageBar]) -> list[dict[str, Any]]:
    """Stage bars as a view shows them: times in RFC 3339."""
    return [
        {"name": name, "start": iso(start), "end": iso(end), "open": is_open}
        for name, start, end, is_open in bars
    ]


def stage_bars(milestones: Sequence[float | None], now: float) -> list[StageBar]:
    """The stage bars between milestones; the current one is open and ends at ``now``.

    Only the last stage reached can be open: a stage before "running" whose end never came
    closes once the pod is past it, and any other stage whose end milestone is unknown or
    before its start (a 1-second object timestamp, e.g. for a pod first seen already
    running) ends where the next stage reached starts."""
    deleted = milestones[DELETED]
    horizon = deleted if deleted is not None else now
    bars = []
    for name, starts, ends, moved_on in _STAGE_SLOTS:
        for index in starts:
            start = milestones[index]
            if start is not None:
                break
        else:
            continue
        end = None
        for index in ends:
            t = milestones[index]
            if t is not None and t >= start and (end is None or t < end):
                end = t
        if end is None and moved_on:
            end = _first(milestones, moved_on)
            if end is not None and end < start:  # a coarse second: the stage took none
                end = start
        bars.append([name, start, end])
    # A stage left open ends where the earliest stage after it starts (the last one stays).
    earliest = None
    for bar in reversed(bars):
        start = bar[1]
        if earliest is not None:
            if bar[2] is None:
                bar[2] = start if start >= earliest else earliest
            if start < earliest:
                earliest = start
        else:
            earliest = start
    closed = deleted is not None
    return [
        (
            name,
            start,
            end if end is not None else horizon if horizon >= start else start,
            end is None and not closed,
        )
        for name, start, end in bars
    ]


def _first(milestones: Sequence[float | None], slots: tuple[int, ...]) -> float | None:
    """The earliest of these milestones reached, if any."""
    found = None
    for index in slots:
        t = milestones[index]
        if t is not None and (found is None or t < found):
            found = t
    return found


def _sorted_events(pod: PodState) -> list[EventRecord]:
    return sorted(
        pod.events,
        key=lambda e: (e.first if e.first is not None else e.observed, e.reason),
    )


def _event_view(record: EventRecord) -> dict[str, Any]:
    return {
        "reason": record.reason,
        "type": record.type,
        "source": record.component or None,
        "host": record.host or None,
        "message": record.message,
        "first": iso(record.first if record.first is not None else record.observed),
        "last": iso(record.last if record.last is not None else record.observed),
        "count": record.count,
    }


def sort_key(view: dict[str, Any]) -> tuple[Any, ...]:
    """Worst first, then oldest first."""
    created = view["milestones"]["created"] or "9999"
    return (-v.severity(view["verdict"]), created, view["namespace"], view["name"])


def describe_changes(pod: PodState) -> list[tuple[float, str]]:
    """The pod's watch updates in words: what each one changed."""
    flat = pod.changes  # five fields per change, one after the other
    if not flat:
        return []
    node = pod.node
    _, old_bits, old_phase, old_reason, old_waiting = flat[:5]
    first = "first seen" + (f" on node {node}" if old_bits & _BOUND_BIT else " without a node")
    described = [(flat[0], first)]
    words = _milestone_words
    for at in range(5, len(flat), 5):
        observed, bits, phase, reason, waiting = flat[at : at + 5]
        parts = []
        new_bits = bits & ~old_bits
        if new_bits & _BOUND_BIT:
            parts.append(f"nodeName set to {node}")
        if old_phase != phase:
            parts.append(f"phase: {old_phase or '-'} → {phase or '-'}")
        if old_reason != reason:
            parts.append(f"reason: {old_reason or '-'} → {reason or '-'}")
        if old_waiting != waiting:
            parts.append(f"waiting: {old_waiting or '-'} → {waiting or '-'}")
        if new_bits & v.DELETING_BIT:
            parts.append("deletionTimestamp set")
        if new_bits & v.DISRUPTION_BIT and pod.disruption is not None:
            parts.append(f"DisruptionTarget: {pod.disruption[0]}")
        milestones = new_bits & _MILESTONE_MASK
        if milestones:
            parts.extend(words(milestones))
        described.append((observed, ", ".join(parts) or "status updated"))
        old_bits, old_phase, old_reason, old_waiting = bits, phase, reason, waiting
    return described


_BOUND_BIT = 1 << BOUND


@lru_cache(maxsize=1 << 10)
def _milestone_words(bits: int) -> tuple[str, ...]:
    """The milestones of these bits in words (a few combinations recur: cached)."""
    words = []
    while bits:
        index = (bits & -bits).bit_length() - 1
        words.append(_MILESTONE_WORDS[index])
        bits &= bits - 1
    return tuple(words)


_MILESTONE_MASK = ((1 << len(v.MILESTONES)) - 1) & ~_BOUND_BIT
_MILESTONE_WORDS = tuple(name.replace("_", " ") for name in v.MILESTONES)
