"""Offline triage: fold a file (a trace, kubectl output, a watch stream, an audit log)
and report on it, as ``manage.py triage`` does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from handoff.core.report import build_report
from handoff.core.timeline import Timeline, fold
from handoff.core.trace import TraceReader, parse_time
from handoff.interop.importers import ImportReader, open_events


def fold_trace(
    path: str | Path, at: float | str | None = None, stuck_after: float = 60.0
) -> dict[str, Any]:
    """Offline triage of a trace file: the same JSON ``manage.py triage`` prints."""
    when = parse_time(at) if isinstance(at, str) else at
    timeline, reader = fold_file(path, until=when)
    return build_report(timeline, at=when, stuck_after=stuck_after, errors=reader.errors)


def fold_file(
    path: str | Path, until: float | None = None
) -> tuple[Timeline, TraceReader | ImportReader]:
    """Fold a whole trace file — or kubectl output, a watch stream, an audit log (the
    importers tell them apart); the reader reports bad lines and skipped kinds."""
    reader = open_events(path)
    timeline = fold(reader, until=until)
    timeline.cluster = reader.header.cluster if reader.header else None
    timeline.skipped.update(reader.skipped)
    return timeline, reader
