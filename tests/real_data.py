"""Turn the real kubectl outputs in shared/traces/real into watch events.

A stand-in until the importers of issue 7 exist: each listed object becomes an
ADDED observed at its own newest timestamp (what a watcher listing it then
would have seen), kinds inferred where bare arrays omit them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from handoff.kube import timestamp
from handoff.trace import WatchEvent, format_time

REAL = Path(__file__).resolve().parents[2] / "shared" / "traces" / "real"
TIME_FIELDS = (
    "creationTimestamp",
    "lastTransitionTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "lastObservedTime",
)


def real_files() -> list[Path]:
    return sorted(p for p in REAL.glob("*.json*") if "audit" not in p.name)


def _newest(value: Any, best: float = 0.0) -> float:
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in TIME_FIELDS and isinstance(inner, str):
                best = max(best, timestamp(inner) or 0.0)
            else:
                best = _newest(inner, best)
    elif isinstance(value, list):
        for inner in value:
            best = _newest(inner, best)
    return best


def _kind(obj: dict[str, Any]) -> str:
    if obj.get("kind"):
        return obj["kind"]
    if "involvedObject" in obj or "regarding" in obj:
        return "Event"
    if "containers" in (obj.get("spec") or {}):
        return "Pod"
    return "Node" if "nodeInfo" in (obj.get("status") or {}) else ""


def load(path: Path) -> list[WatchEvent]:
    text = path.read_text()
    stripped = text.lstrip()
    if stripped.startswith("{") and '"type"' in stripped.splitlines()[0]:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        pairs = [(r["type"], r["object"]) for r in records]
    else:
        data = json.loads(text)
        items = data["items"] if isinstance(data, dict) else data
        pairs = [("ADDED", item) for item in items]
    events = []
    for type_, obj in pairs:
        obj = dict(obj, kind=_kind(obj))
        events.append(WatchEvent(format_time(_newest(obj) + 1.5), type_, obj))
    events.sort(key=lambda e: e.observed)
    return events
