"""Kubernetes objects from any input, made ready for a trace: kind filled in, legacy
fields moved, secrets scrubbed, and the times each object carries."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from handoff.core.facts import timestamp
from handoff.core.redact import scrub
from handoff.core.schema import ValidationError, to_object
from handoff.core.trace import LineError, WatchEvent, encode_event, format_time

KINDS = frozenset({"Pod", "Node", "Event"})
# An object's own times that say when something already happened (deletionTimestamp
# is left out: a graceful deletion puts it in the future).
PAST_TIME_FIELDS = (
    "creationTimestamp",
    "lastTransitionTime",
    "lastHeartbeatTime",
    "startTime",
    "startedAt",
    "finishedAt",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "lastObservedTime",
    "deprecatedFirstTimestamp",
    "deprecatedLastTimestamp",
)
_TIME_BYTES = re.compile(
    rb'"(?:' + b"|".join(f.encode() for f in PAST_TIME_FIELDS) + rb')"\s*:\s*"([^"]{10,40})"'
)


def infer_kind(obj: dict[str, Any]) -> str:
    """A bare array's items (a sonobuoy dump) may omit kind: read it from the shape."""
    kind = obj.get("kind")
    if isinstance(kind, str) and kind:
        return kind
    if "involvedObject" in obj or "regarding" in obj:
        return "Event"
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    if "containers" in spec:
        return "Pod"
    if "nodeInfo" in status or "podCIDR" in spec or "providerID" in spec:
        return "Node"
    return ""


def normalise(obj: dict[str, Any]) -> dict[str, Any]:
    """Kind and apiVersion filled in, pre-v1 fields moved to where v1 has them, scrubbed."""
    kind = infer_kind(obj)
    obj["kind"] = kind
    if not isinstance(obj.get("apiVersion"), str):
        obj["apiVersion"] = "events.k8s.io/v1" if "regarding" in obj else "v1"
    if kind == "Pod":
        _legacy_pod(obj)
    return scrub(obj)


def _legacy_pod(obj: dict[str, Any]) -> None:
    """v1beta3 pods (2015) named the bound node ``status.host``; v1 calls it spec.nodeName."""
    status = obj.get("status")
    if isinstance(status, dict) and isinstance(status.get("host"), str):
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict) and not spec.get("nodeName"):
            spec["nodeName"] = status["host"]


def newest_time(value: Any, best: float | None = None) -> float | None:
    """The latest past timestamp anywhere in an object (1-second precision)."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if key in PAST_TIME_FIELDS and isinstance(inner, str):
                at = timestamp(inner)
                if at is not None and (best is None or at > best):
                    best = at
            elif isinstance(inner, dict | list):
                best = newest_time(inner, best)
    elif isinstance(value, list):
        for inner in value:
            best = newest_time(inner, best)
    return best


def newest_time_in_bytes(data: bytes, best: float | None = None) -> float | None:
    """The same, straight from JSON bytes, without parsing them."""
    for match in _TIME_BYTES.finditer(data):
        at = timestamp(match.group(1).decode("utf-8", "replace"))
        if at is not None and (best is None or at > best):
            best = at
    return best


def deletion_requested_at(obj: dict[str, Any]) -> float | None:
    """When a graceful deletion was asked for: deletionTimestamp minus the grace period."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    at = timestamp(meta.get("deletionTimestamp"))
    grace = meta.get("deletionGracePeriodSeconds")
    if at is None or not isinstance(grace, int | float):
        return None
    return at - grace


class EventMaker:
    """Builds the WatchEvents an importer yields, with the same checks as TraceReader:
    kinds outside Pod/Node/Event are counted in ``skipped``, misshapen ones reported."""

    def __init__(
        self, errors: list[LineError], skipped: Counter[str], kinds: frozenset[str] | None
    ) -> None:
        self.errors = errors
        self.skipped = skipped
        self.kinds = kinds

    def wanted(self, obj: Any, line: int) -> bool:
        if not isinstance(obj, dict):
            self.errors.append(LineError(line, "not a JSON object"))
            return False
        kind = infer_kind(obj)
        if self.kinds is not None and kind not in self.kinds:
            self.skipped[kind or "<no kind>"] += 1
            return False
        return True

    def make(self, at: float, type_: str, obj: dict[str, Any], line: int) -> WatchEvent | None:
        """``obj`` must already be normalised (scrubbed)."""
        try:
            typed = to_object(obj)
        except ValidationError as exc:
            self.errors.append(LineError(line, f"unexpected {obj.get('kind')} shape: {exc}"))
            return None
        observed = format_time(at)
        raw = encode_event(observed, type_, obj)
        return WatchEvent(observed, type_, typed, None, line, at, raw)
