"""The triage report: every pod's verdict, milestones, stages and events at a time,
as JSON (CLI, API); the terminal table is ``interop.exporters.tables.render_table``."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import orjson

from handoff.core import verdicts as v
from handoff.core.durations import add_samples, new_samples, summarise
from handoff.core.gcpause import paused_gc
from handoff.core.owners import OwnerBook
from handoff.core.podstate import CREATED, PodState
from handoff.core.timeline import Timeline
from handoff.core.trace import LineError
from handoff.core.views import iso, pod_view, row_view

MAX_ERRORS_LISTED = 100


def evaluation_time(timeline: Timeline, at: float | None) -> float:
    if at is not None:
        return at
    return timeline.last_observed if timeline.last_observed is not None else 0.0


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


def judged(
    timeline: Timeline, at: float | None = None, stuck_after: float = 60.0
) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """outline()'s summary and every pod ranked with its judgement: (-severity, created,
    namespace, name, uid, pod, judgement), worst first then oldest first."""
    head, ranked, _ = _ranked(timeline, at, stuck_after, (), ())
    return head, ranked


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
    # The report's own copy of the owners: judging here changes no shared timeline (a
    # replay's, a live fold's) and leaves nothing for the fold to write.
    owners = OwnerBook(timeline.owners.data())
    tally = judge_pods(timeline, now, stuck_after, only, owners.note_ending)
    durations = summarise(tally.samples, tally.unobserved)
    head = report_head(timeline, now, stuck_after, tally.counts, durations, owners, errors)
    return head, tally.ranked, now


class Tally:
    """One judging pass over pods: verdict counts, duration samples and the pods to
    show, ranked (``ranked_item``)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.samples = new_samples()
        self.unobserved: dict[str, int] = {}
        self.ranked: list[tuple[Any, ...]] = []


def judge_pods(
    timeline: Timeline,
    now: float,
    stuck_after: float,
    only: Iterable[str],
    note_ending: Callable[[PodState, str, str | None], None],
) -> Tally:
    """Judge every pod of ``timeline`` at ``now``, in its order; each owned pod's ending
    goes to ``note_ending`` (an ``OwnerBook``'s, or a parallel worker's record of it)."""
    wanted = set(only)
    tally = Tally()
    counts, samples, unobserved, ranked = (
        tally.counts,
        tally.samples,
        tally.unobserved,
        tally.ranked,
    )
    judge = timeline.judge
    with paused_gc():
        for pod in timeline.pods.values():
            judgement = judge(pod, now, stuck_after)
            verdict = judgement.verdict
            counts[verdict] += 1
            if pod.owner is not None:
                note_ending(pod, verdict, judgement.reason)
            add_samples(pod, samples, unobserved)
            if not wanted or verdict in wanted:
                ranked.append(ranked_item(pod, judgement))
        ranked.sort()
    return tally


def report_head(
    timeline: Timeline,
    now: float,
    stuck_after: float,
    counts: Counter[str],
    durations: dict[str, dict[str, Any]],
    owners: OwnerBook,
    errors: Iterable[LineError] = (),
) -> dict[str, Any]:
    """The report's header from one judging pass: verdict ``counts``, ``durations``
    (``summarise``d) and ``owners`` with every owned pod's ending noted (a replay's
    steady judging, offline/judging.py, makes the same header)."""
    error_list = list(errors)
    return {
        "evaluated_at": iso(now),
        "cluster": timeline.cluster,
        "stuck_after": stuck_after,
        "summary": {
            "verdicts": {name: counts.get(name, 0) for name in v.VERDICT_NAMES},
            "durations": durations,
            "pods": sum(counts.values()),
            "nodes": len(timeline.nodes),
        },
        "owners": owners_report(owners, now),
        "skipped": dict(sorted(timeline.skipped.items())),
        "watch_errors": len(timeline.watch_errors),
        "errors": [{"line": e.line, "message": e.message} for e in error_list[:MAX_ERRORS_LISTED]],
        "error_count": len(error_list),
    }


def owners_report(owners: OwnerBook, now: float) -> dict[str, Any]:
    """Workloads as one incident each: controllers that fail to create pods (resolved ones
    too, with when) and owners whose pods keep ending the same way (core/owners.py)."""
    return {"failing": owners.failing(now, resolved=True), "loops": owners.loops(now)}


_SEVERITY = {name: verdict.severity for name, verdict in v.VERDICTS.items()}


def ranked_item(pod: PodState, judgement: Any) -> tuple[Any, ...]:
    """A pod as ``judged`` ranks it: (-severity, created, namespace, name, uid, pod,
    judgement)."""
    created = pod.milestones[CREATED]
    return (
        -_SEVERITY[judgement.verdict],
        math.inf if created is None else created,
        pod.namespace,
        pod.name,
        pod.uid,
        pod,
        judgement,
    )


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
    return with_pods(head, views)


def build_rows(
    timeline: Timeline,
    at: float | None = None,
    stuck_after: float = 60.0,
    errors: Iterable[LineError] = (),
    only: Iterable[str] = (),
) -> dict[str, Any]:
    """``build_report`` with each pod's ``row_view`` in place of its whole view: what a
    one-line-per-pod table (``render_table``) reads."""
    head, ranked, _now = _ranked(timeline, at, stuck_after, errors, only)
    with paused_gc():
        rows = [row_view(timeline, item[_POD], item[_JUDGEMENT]) for item in ranked]
    return with_pods(head, rows)


def pod_views(
    timeline: Timeline,
    at: float | None = None,
    stuck_after: float = 60.0,
    errors: Iterable[LineError] = (),
    only: Iterable[str] = (),
) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """The report's header fields and its pod views, made one at a time as they are read
    (worst first), so that they can be written without holding them all."""
    head, ranked, now = _ranked(timeline, at, stuck_after, errors, only)
    views = (pod_view(timeline, item[_POD], now, stuck_after, item[_JUDGEMENT]) for item in ranked)
    return head, views


def write_report_json(
    out: IO[bytes],
    timeline: Timeline,
    at: float | None = None,
    stuck_after: float = 60.0,
    errors: Iterable[LineError] = (),
    only: Iterable[str] = (),
) -> None:
    """The same JSON as ``build_report``, written pod by pod (one pod per line)."""
    head, views = pod_views(timeline, at, stuck_after, errors, only)
    with paused_gc():
        write_views_json(out, head, views)


def write_views_json(out: IO[bytes], head: dict[str, Any], views: Iterable[dict[str, Any]]) -> None:
    """``{...head, "pods": [view, ...]}`` in the report's key order, one pod per line."""
    write_dumped_json(out, head, map(orjson.dumps, views))


def write_dumped_json(out: IO[bytes], head: dict[str, Any], dumped: Iterable[bytes]) -> None:
    """``write_views_json`` of views already serialised (``orjson.dumps``), in order."""
    opening, closing = json_frame(head)
    out.write(opening)
    write = out.write
    for index, view in enumerate(dumped):
        write((b"\n" if index == 0 else b",\n") + view)
    out.write(closing)


def json_frame(head: dict[str, Any]) -> tuple[bytes, bytes]:
    """The report's JSON before its first pod view (up to ``"pods":[``) and after its
    last (from the ``]``); the views go between, each on its own line."""
    first, rest = orjson.dumps(with_pods(head, [])).split(b'"pods":[]', 1)
    return first + b'"pods":[', b"\n]" + rest + b"\n"


def with_pods(head: dict[str, Any], views: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's keys in their documented order, pods after the header fields."""
    order = ("evaluated_at", "cluster", "stuck_after")
    report = {key: head[key] for key in order}
    report["pods"] = views
    report.update((key, value) for key, value in head.items() if key not in order)
    return report
