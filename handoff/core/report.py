"""The triage report: every pod's verdict, milestones, stages and events at a time,
as JSON (CLI, API) or as a table for a terminal."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import IO, TYPE_CHECKING, Any

import orjson

from handoff.core import verdicts as v
from handoff.core.durations import add_samples, new_samples, pod_durations, summarise
from handoff.core.explain import Context, explain
from handoff.core.facts import parse_admission_message
from handoff.core.gcpause import paused_gc
from handoff.core.trace import LineError, format_time, parse_time

if TYPE_CHECKING:
    from handoff.core.timeline import Judgement, PodState, Timeline


_INDEX = {name: index for index, name in enumerate(v.MILESTONES)}
MAX_ERRORS_LISTED = 100


@lru_cache(maxsize=1 << 12)
def _iso(value: float | None) -> str | None:
    # The same instants recur in a pod's milestones, stages and changes: a cache
    # that spans a few pods catches them; one spanning every pod only costs memory.
    return None if value is None else format_time(value)


def evaluation_time(timeline: Timeline, at: float | None) -> float:
    if at is not None:
        return at
    return timeline.last_observed if timeline.last_observed is not None else 0.0


def pod_view(
    timeline: Timeline,
    pod: PodState,
    now: float,
    stuck_after: float = 60.0,
    judgement: Judgement | None = None,
) -> dict[str, Any]:
    """Everything the CLI, the API and the pod page show about one pod (``judgement``:
    the pod's, when the caller has just judged it at ``now``)."""
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
    bound = m[_INDEX["bound"]] if m[_INDEX["bound"]] is not None else m[_INDEX["created"]]
    window = judgement.podgc_window
    ctx = Context(
        node=pod.node,
        binding=binding,
        message=message,
        resources=parse_admission_message(message) if rejection else None,
        owner_kind=pod.owner[0] if pod.owner else "",
        since_bound=None if bound is None else max(0.0, now - bound),
        podgc_from=format_time(window[0]) if window else "",
        podgc_to=format_time(window[1]) if window else "",
        node_lost_at=_iso(judgement.node_lost_at) or "",
    )
    known = [t for t in m if t is not None]
    return {
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": None if pod.uid.startswith("name:") else pod.uid,
        "node": pod.node or None,
        "node_exists": judgement.node_exists,
        "binding": binding,
        "owner": {"kind": pod.owner[0], "name": pod.owner[1]} if pod.owner else None,
        "verdict": judgement.verdict,
        "reason": judgement.reason,
        "explanation": explain(judgement.verdict, judgement.reason, ctx),
        "since": _iso(max(known)) if known else None,
        "milestones": dict(zip(v.MILESTONES, map(_iso, m), strict=True)),
        "durations": pod_durations(pod),
        "stages": stages(m, now),
        "rejection": rejection,
        "podgc": {"earliest": _iso(window[0]), "latest": _iso(window[1])} if window else None,
        "events": [_event_view(record) for record in _sorted_events(pod)],
        "changes": [{"at": _iso(t), "what": text} for t, text in describe_changes(pod)],
    }


_STAGE_SLOTS = tuple(
    (stage.name, tuple(_INDEX[s] for s in stage.starts), tuple(_INDEX[e] for e in stage.ends))
    for stage in v.STAGES
)
_DELETED = _INDEX["deleted"]


def stages(milestones: Sequence[float | None], now: float) -> list[dict[str, Any]]:
    """The stage bars between milestones; the current one is open and ends at ``now``.

    Only the last stage reached can be open: a stage whose end milestone is unknown or
    before its start (a 1-second object timestamp, e.g. for a pod first seen already
    running) ends where the next stage reached starts."""
    deleted = milestones[_DELETED]
    horizon = deleted if deleted is not None else now
    bars = []
    for name, starts, ends in _STAGE_SLOTS:
        start = None
        for index in starts:
            if milestones[index] is not None:
                start = milestones[index]
                break
        if start is None:
            continue
        end = None
        for index in ends:
            t = milestones[index]
            if t is not None and t >= start and (end is None or t < end):
                end = t
        bars.append([name, start, end])
    for i in range(len(bars) - 1):
        if bars[i][2] is None:
            bars[i][2] = max(bars[i][1], min(later[1] for later in bars[i + 1 :]))
    return [
        {
            "name": name,
            "start": _iso(start),
            "end": _iso(end if end is not None else max(horizon, start)),
            "open": end is None and deleted is None,
        }
        for name, start, end in bars
    ]


def _sorted_events(pod: PodState) -> list[Any]:
    return sorted(
        pod.events,
        key=lambda e: (e.first if e.first is not None else e.observed, e.reason),
    )


def _event_view(record: Any) -> dict[str, Any]:
    return {
        "reason": record.reason,
        "type": record.type,
        "source": record.component or None,
        "host": record.host or None,
        "message": record.message,
        "first": _iso(record.first if record.first is not None else record.observed),
        "last": _iso(record.last if record.last is not None else record.observed),
        "count": record.count,
    }


def sort_key(view: dict[str, Any]) -> tuple[Any, ...]:
    """Worst first, then oldest first."""
    created = view["milestones"]["created"] or "9999"
    return (-v.severity(view["verdict"]), created, view["namespace"], view["name"])


_CREATED = _INDEX["created"]


def outline(
    timeline: Timeline,
    at: float | None = None,
    stuck_after: float = 60.0,
    errors: Iterable[LineError] = (),
    only: Iterable[str] = (),
) -> tuple[dict[str, Any], list[PodState], float]:
    """Everything in the report but the pod views: the summary from one judging pass,
    and the pods to show, worst first then oldest first. Views can then be made one
    at a time, so a report of 100,000s of pods need not sit in memory whole."""
    head, ranked, now = _ranked(timeline, at, stuck_after, errors, only)
    return head, [item[_POD] for item in ranked], now


# A ranked pod: (-severity, created, namespace, name, uid, pod, judgement). The uid
# is unique, so sorting these tuples never compares the last two.
_POD, _JUDGEMENT = 5, 6


def _ranked(
    timeline: Timeline,
    at: float | None,
    stuck_after: float,
    errors: Iterable[LineError],
    only: Iterable[str],
) -> tuple[dict[str, Any], list[tuple[Any, ...]], float]:
    """outline(), with each shown pod's judgement kept for its view."""
    now = evaluation_time(timeline, at)
    wanted = set(only)
    counts: Counter[str] = Counter()
    samples = new_samples()
    unobserved: dict[str, int] = {}
    ranked = []
    judge, inf = timeline.judge, math.inf
    with paused_gc():
        for pod in timeline.pods.values():
            judgement = judge(pod, now, stuck_after)
            verdict = judgement.verdict
            counts[verdict] += 1
            add_samples(pod, samples, unobserved)
            if not wanted or verdict in wanted:
                created = pod.milestones[_CREATED]
                ranked.append(
                    (
                        -_SEVERITY[verdict],
                        inf if created is None else created,
                        pod.namespace,
                        pod.name,
                        pod.uid,
                        pod,
                        judgement,
                    )
                )
        ranked.sort()
    error_list = list(errors)
    head = {
        "evaluated_at": _iso(now),
        "cluster": timeline.cluster,
        "stuck_after": stuck_after,
        "summary": {
            "verdicts": {name: counts.get(name, 0) for name in v.VERDICT_NAMES},
            "durations": summarise(samples, unobserved),
            "pods": sum(counts.values()),
            "nodes": len(timeline.nodes),
        },
        "skipped": dict(sorted(timeline.skipped.items())),
        "watch_errors": len(timeline.watch_errors),
        "errors": [{"line": e.line, "message": e.message} for e in error_list[:MAX_ERRORS_LISTED]],
        "error_count": len(error_list),
    }
    return head, ranked, now


_SEVERITY = {name: verdict.severity for name, verdict in v.VERDICTS.items()}


def build_report(
    timeline: Timeline,
    at: float | None = None,
    stuck_after: float = 60.0,
    errors: Iterable[LineError] = (),
    only: Iterable[str] = (),
) -> dict[str, Any]:
    """The triage JSON: ``{evaluated_at, cluster, stuck_after, pods, summary, ...}``."""
    head, ranked, now = _ranked(timeline, at, stuck_after, errors, only)
    with paused_gc():
        views = [
            pod_view(timeline, item[_POD], now, stuck_after, item[_JUDGEMENT]) for item in ranked
        ]
    return _with_pods(head, views)


def write_report_json(
    out: IO[bytes],
    timeline: Timeline,
    at: float | None = None,
    stuck_after: float = 60.0,
    errors: Iterable[LineError] = (),
    only: Iterable[str] = (),
) -> None:
    """The same JSON as ``build_report``, written pod by pod (one pod per line)."""
    head, ranked, now = _ranked(timeline, at, stuck_after, errors, only)
    first, rest = orjson.dumps(_with_pods(head, [])).split(b'"pods":[]', 1)
    out.write(first + b'"pods":[')
    dumps, write = orjson.dumps, out.write
    with paused_gc():
        for index, item in enumerate(ranked):
            view = pod_view(timeline, item[_POD], now, stuck_after, item[_JUDGEMENT])
            write((b"\n" if index == 0 else b",\n") + dumps(view))
    out.write(b"\n]" + rest + b"\n")


def _with_pods(head: dict[str, Any], views: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's keys in their documented order, pods after the header fields."""
    order = ("evaluated_at", "cluster", "stuck_after")
    report = {key: head[key] for key in order}
    report["pods"] = views
    report.update((key, value) for key, value in head.items() if key not in order)
    return report


# ------------------------------------------------------------------ table

_COLUMNS = ("VERDICT", "REASON", "POD", "NODE", "BINDING", "IN STAGE", "CREATE→RUN")


def render_table(report: dict[str, Any], colour: bool = False) -> str:
    """A line per pod, worst first; coloured by verdict when ``colour``."""
    now = report["evaluated_at"]
    rows = [_row(view, now) for view in report["pods"]]
    widths = [len(c) for c in _COLUMNS]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(_COLUMNS, widths, strict=True)).rstrip()]
    for view, row in zip(report["pods"], rows, strict=True):
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        lines.append(_paint(line, view["verdict"]) if colour else line)
    lines.append("")
    lines.append(_summary_line(report))
    return "\n".join(lines)


def _row(view: dict[str, Any], now: str | None) -> list[str]:
    node = view["node"] or "-"
    if view["node_exists"] is False:
        node += " (missing)"
    create_to_run = view["durations"]["create_to_running"]
    return [
        view["verdict"],
        view["reason"] or "",
        f"{view['namespace']}/{view['name']}",
        node,
        view["binding"] or "-",
        _ago(view["since"], now),
        "-" if create_to_run is None else f"{create_to_run:.1f}s",
    ]


def _ago(since: str | None, now: str | None) -> str:
    if since is None or now is None:
        return "-"
    seconds = max(0.0, parse_time(now) - parse_time(since))
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _paint(line: str, verdict: str) -> str:
    hexcode = v.colour(verdict).lstrip("#")
    red, green, blue = (int(hexcode[i : i + 2], 16) for i in (0, 2, 4))
    return f"\x1b[38;2;{red};{green};{blue}m{line}\x1b[0m"


def _summary_line(report: dict[str, Any]) -> str:
    counts = report["summary"]["verdicts"]
    parts = [f"{name} {count}" for name, count in counts.items() if count]
    head = f"{report['summary']['pods']} pods at {report['evaluated_at']}"
    return head + (": " + ", ".join(parts) if parts else "")


def describe_changes(pod: PodState) -> list[tuple[float, str]]:
    """The pod's watch updates in words: what each one changed."""
    flat = pod.changes  # five fields per change, one after the other
    if not flat:
        return []
    bits = flat[1]
    first = "first seen" + (f" on node {pod.node}" if bits & _BOUND_BIT else " without a node")
    described = [(flat[0], first)]
    for at in range(5, len(flat), 5):
        _, old_bits, old_phase, old_reason, old_waiting = flat[at - 5 : at]
        observed, bits, phase, reason, waiting = flat[at : at + 5]
        parts = []
        new_bits = bits & ~old_bits
        if new_bits & _BOUND_BIT:
            parts.append(f"nodeName set to {pod.node}")
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
        parts.extend(_milestone_words(new_bits & ~_BOUND_BIT))
        described.append((observed, ", ".join(parts) or "status updated"))
    return described


_BOUND_BIT = 1 << _INDEX["bound"]


def _milestone_words(bits: int) -> list[str]:
    words = []
    bits &= (1 << len(v.MILESTONES)) - 1
    while bits:
        index = (bits & -bits).bit_length() - 1
        words.append(_MILESTONE_WORDS[index])
        bits &= bits - 1
    return words


_MILESTONE_WORDS = tuple(name.replace("_", " ") for name in v.MILESTONES)
