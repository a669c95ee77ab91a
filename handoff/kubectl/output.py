"""What the plugin prints, the way kubectl prints: tables with upper-case headers and a
NAMESPACE column for ``-A``, ``-o wide`` for more columns, ``-o json`` for the pod views
as the API and ``triage --format json`` give them, and a describe-like page for one pod."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

from handoff.core import verdicts as v
from handoff.core.trace import parse_time

COLUMNS = ("NAME", "VERDICT", "REASON", "NODE", "IN STAGE", "CREATE→RUN")
WIDE = ("BINDING", "CREATE→BIND", "BIND→ACK", "ACK→RUN", "UID")


def human_duration(seconds: float) -> str:
    """kubectl's short durations (k8s.io/apimachinery/pkg/util/duration.HumanDuration)."""
    s = int(max(0.0, seconds))
    if s < 120:
        return f"{s}s"
    minutes, hours, days = s // 60, s // 3600, s // 86400
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 365 * 2 else f"{days // 365}y"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}s"


def _age(since: str | None, now: str | None) -> str:
    if not since or not now:
        return "-"
    return human_duration(parse_time(now) - parse_time(since))


def _node(view: dict[str, Any]) -> str:
    node = view.get("node") or "<none>"
    return node + " (missing)" if view.get("node_exists") is False else node


def _cells(view: dict[str, Any], now: str | None, all_namespaces: bool, wide: bool) -> list[str]:
    d = view.get("durations") or {}
    row = [
        view["name"],
        view["verdict"],
        view.get("reason") or "<none>",
        _node(view),
        _age(view.get("since"), now),
        _seconds(d.get("create_to_running")),
    ]
    if all_namespaces:
        row.insert(0, view["namespace"])
    if wide:
        row += [view.get("binding") or "<none>"]
        row += [_seconds(d.get(k)) for k in ("create_to_bind", "bind_to_ack", "ack_to_running")]
        row += [view.get("uid") or "<none>"]
    return row


def table(
    views: Sequence[dict[str, Any]], now: str | None, all_namespaces: bool, wide: bool
) -> str:
    """The pods as kubectl get prints them: columns three spaces apart."""
    header = list(COLUMNS) + (list(WIDE) if wide else [])
    if all_namespaces:
        header.insert(0, "NAMESPACE")
    rows = [header] + [_cells(view, now, all_namespaces, wide) for view in views]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return (
        "\n".join(
            "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in rows
        )
        + "\n"
    )


def as_json(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def describe(view: dict[str, Any], cluster: str, now: str | None) -> str:
    """One pod: who and where, the verdict with its reason and remedy, the timeline (stages,
    then the watch updates in words) and the pod's Kubernetes events."""
    verdict = view["verdict"]
    summary = v.VERDICTS[verdict].summary if verdict in v.VERDICTS else ""
    lines = [
        f"Name:         {view['name']}",
        f"Namespace:    {view['namespace']}",
        f"Cluster:      {cluster}",
        f"UID:          {view.get('uid') or '<none>'}",
        f"Node:         {_node(view)}",
        f"Binding:      {view.get('binding') or '<none>'}",
        f"Verdict:      {verdict}" + (f" ({summary})" if summary else ""),
        f"Reason:       {view.get('reason') or '<none>'}",
        "Explanation:  " + _wrapped(view.get("explanation") or "", 14),
        "Timeline:",
    ]
    lines += _stage_lines(view.get("stages") or []) or ["  <none>"]
    lines.append("Changes:")
    lines += [f"  {c['at']}  {c['what']}" for c in view.get("changes") or []] or ["  <none>"]
    lines.append("Events:")
    lines += _event_lines(view.get("events") or [], now) or ["  <none>"]
    return "\n".join(lines) + "\n"


def _wrapped(text: str, indent: int) -> str:
    """``text`` wrapped at 100 columns, for a line whose first ``indent`` hold a label."""
    if not text:
        return "<none>"
    pad = " " * indent
    return textwrap.fill(text, width=100, initial_indent=pad, subsequent_indent=pad)[indent:]


def _stage_lines(stages: list[dict[str, Any]]) -> list[str]:
    rows = [["STAGE", "START", "TOOK"]]
    for stage in stages:
        took = _seconds(parse_time(stage["end"]) - parse_time(stage["start"]))
        rows.append(
            [stage["name"], stage["start"], took + (" (open)" if stage.get("open") else "")]
        )
    return _indented(rows) if stages else []


def _event_lines(events: list[dict[str, Any]], now: str | None) -> list[str]:
    rows = [["TYPE", "REASON", "AGE", "FROM", "MESSAGE"]]
    for event in events:
        source = event.get("source") or "<unknown>"
        if event.get("host"):
            source += f", {event['host']}"
        count = event.get("count") or 1
        age = _age(event.get("last") or event.get("first"), now)
        rows.append(
            [
                event.get("type") or "",
                event.get("reason") or "",
                age + (f" (x{count})" if count > 1 else ""),
                source,
                (event.get("message") or "").replace("\n", " "),
            ]
        )
    return _indented(rows) if events else []


def _indented(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  " + "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
