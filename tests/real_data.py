"""The real kubectl outputs, watch streams and audit log in shared/traces/real, read
through the importers (handoff.interop.importers) exactly as `convert` and `triage` read them."""

from __future__ import annotations

from pathlib import Path

from handoff.core.trace import WatchEvent
from handoff.interop.importers import open_events

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces" / "real"


def real_files() -> list[Path]:
    """Every data file there (the README is INDEX.md), the audit log included."""
    return sorted(p for p in REAL.iterdir() if p.is_file() and p.suffix != ".md")


def load(path: Path) -> list[WatchEvent]:
    reader = open_events(path)
    events = list(reader)
    assert not reader.errors, reader.errors
    return events
