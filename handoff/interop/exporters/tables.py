"""The triage table as CSV and JSON downloads (the rows the board shows, in its order),
and as text for a terminal (``render_table``).

Values are written as they are (no HTML escaping: these are data files). The one change is
in CSV: a text cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is
prefixed with ``'`` so a spreadsheet opening the file shows it instead of running it as a
formula (an Event message is written by whoever can create Events).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson

from handoff.core import verdicts as v
from handoff.core.trace import parse_time

COLUMNS: tuple[str, ...] = (
    "namespace",
    "name",
    "uid",
    "verdict",
    "reason",
    "node",
    "binding",
    "created",
    "bound",
    "kubelet_ack",
    "running",
    "deleted",
    "create_to_bind",
    "bind_to_ack",
    "ack_to_running",
    "create_to_running",
    "explanation",
)
_MILESTONE_COLUMNS = ("created", "bound", "kubelet_ack", "running", "deleted")
_DURATION_COLUMNS = ("create_to_bind", "bind_to_ack", "ack_to_running", "create_to_running")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def row(view: Mapping[str, Any]) -> list[Any]:
    milestones = view.get("milestones") or {}
    durations = view.get("durations") or {}
    cells: list[Any] = []
    for column in COLUMNS:
        if column in _MILESTONE_COLUMNS:
            cells.append(milestones.get(column))
        elif column in _DURATION_COLUMNS:
            cells.append(durations.get(column))
        else:
            cells.append(view.get(column))
    return cells


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def csv_lines(views: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """The header, then one CSV line per pod (RFC 4180 quoting, CRLF line ends)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(COLUMNS)
    yield buffer.getvalue()
    for view in views:
        buffer.seek(0)
        buffer.truncate()
        writer.writerow([_cell(value) for value in row(view)])
        yield buffer.getvalue()


def json_chunks(head: Mapping[str, Any], views: Iterable[Mapping[str, Any]]) -> Iterator[bytes]:
    """``{...head, "pods": [view, ...]}`` written pod by pod (one per line)."""
    opening, closing = orjson.dumps({**head, "pods": []}).rsplit(b"[]", 1)
    yield opening + b"["
    for index, view in enumerate(views):
        yield (b"\n" if index == 0 else b",\n") + orjson.dumps(view)
    yield b"\n]" + closing + b"\n"


# ------------------------------------------------------- terminal table

_COLUMNS = ("VERDICT", "REASON", "POD", "NODE", "BINDING", "IN STAGE", "CREATE→RUN")


def render_table(report: dict[str, Any], colour: bool = False) -> str:
    """A line per pod, worst first; coloured by verdict when ``colour``."""
    evaluated = report["evaluated_at"]
    now = None if evaluated is None else parse_time(evaluated)
    rows = [_row(view, now) for view in report["pods"]]
    widths = [len(c) for c in _COLUMNS]
    if rows:  # per column, its longest cell
        widths = [
            max(w, max(map(len, cells)))
            for w, cells in zip(widths, zip(*rows, strict=True), strict=True)
        ]
    # Every cell left-aligned to its column's width, as str.ljust pads.
    pattern = "  ".join(f"{{:<{width}}}" for width in widths)
    lines = _owner_lines(report.get("owners") or {}, now)
    lines.append(pattern.format(*_COLUMNS).rstrip())
    for view, row in zip(report["pods"], rows, strict=True):
        line = pattern.format(*row).rstrip()
        lines.append(_paint(line, view["verdict"]) if colour else line)
    lines.append("")
    lines.append(_summary_line(report))
    return "\n".join(lines)


def _owner_lines(owners: dict[str, Any], now: float | None) -> list[str]:
    """Workloads as one line each, above the pods: controllers creating no pods (those not
    resolved), then loops (core/owners.py)."""
    lines = []
    failing = [f for f in owners.get("failing") or () if not f["resolved"]]
    if failing:
        lines.append("WORKLOADS CREATING NO PODS")
        for f in failing:
            owner = f["owner"]
            via = f" (Deployment {f['workload']['name']})" if f["workload"] else ""
            stale = ", stale" if f["stale"] else ""
            lines.append(
                f"  {owner['kind']} {owner['namespace']}/{owner['name']}{via}: {f['reason']}"
                f" {f['cause']}, {f['count']}x, last {_ago(f['last'], now)} ago{stale}:"
                f" {_one_line(f['message'])}"
            )
    loops = owners.get("loops") or ()
    if loops:
        lines.append("LOOPS (an owner's pods ending the same way)")
        for loop in loops:
            pods = ", ".join(loop["pods"])
            owner = loop["owner"]
            lines.append(
                f"  {owner['kind']} {owner['namespace']}/{owner['name']}:"
                f" {_one_line(loop['summary'])}; last {_ago(loop['last'], now)} ago"
                f"{'' if loop['active'] else ' (stopped)'} ({pods})"
            )
    if lines:
        lines.append("")
    return lines


def _one_line(text: str, limit: int = 200) -> str:
    """Cluster text on one terminal line: control characters and runs of space as one."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _row(view: dict[str, Any], now: float | None) -> list[str]:
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


def _ago(since: str | None, now: float | None) -> str:
    if since is None or now is None:
        return "-"
    seconds = max(0.0, now - _epoch(since))
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _epoch(text: str) -> float:
    """``parse_time`` of a report's own times (``format_time``'s form), the same double
    without a datetime per pod: the whole microseconds over 10**6, as
    ``datetime.timestamp`` computes them; the second's epoch is cached."""
    if len(text) == 27 and text[19] == "." and text[26] == "Z" and text[20:26].isdigit():
        second = _SECONDS.get(text[:19])
        if second is None:
            second = _SECONDS[text[:19]] = int(parse_time(text[:19] + "Z"))
        return (second * 1_000_000 + int(text[20:26])) / 1_000_000
    return parse_time(text)


_SECONDS: dict[str, int] = {}


def _paint(line: str, verdict: str) -> str:
    hexcode = v.colour(verdict).lstrip("#")
    red, green, blue = (int(hexcode[i : i + 2], 16) for i in (0, 2, 4))
    return f"\x1b[38;2;{red};{green};{blue}m{line}\x1b[0m"


def _summary_line(report: dict[str, Any]) -> str:
    counts = report["summary"]["verdicts"]
    parts = [f"{name} {count}" for name, count in counts.items() if count]
    head = f"{report['summary']['pods']} pods at {report['evaluated_at']}"
    return head + (": " + ", ".join(parts) if parts else "")
