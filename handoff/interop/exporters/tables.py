"""The triage table as CSV and JSON downloads: the rows the board shows, in its order.

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
