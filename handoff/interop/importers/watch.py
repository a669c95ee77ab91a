"""``kubectl get pods -w --output-watch-events -o json`` (``{"type", "object"}`` values) and
plain ``kubectl get pods -w -o json`` (bare objects, no event types).

kubectl prints no receive time. Each event is observed at the newest past timestamp its
object carries (or the moment a graceful deletion was asked for) plus ``HALF_SECOND`` —
the middle of that 1-second timestamp's interval — and never before the previous event, so
the stream stays in order. Precision: ±0.5 s for an event whose change stamped a time (a
condition transition, a container start, an Event's time); an event whose change stamped
nothing (a ``DELETED``, a label edit) inherits the previous event's time, a lower bound.

Without event types, the first sight of an object is ``ADDED`` and later ones
``MODIFIED``; deletions cannot be told apart and are not reported.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from handoff.core.trace import WATCH_TYPES, LineError, WatchEvent
from handoff.interop.importers.objects import (
    EventMaker,
    deletion_requested_at,
    newest_time,
    newest_time_in_bytes,
    normalise,
)

HALF_SECOND = 0.5


class WatchStream:
    def __init__(self, maker: EventMaker) -> None:
        self.maker = maker
        self.last: float | None = None
        self.seen: set[str] = set()

    def take(
        self, line: int, record: dict[str, Any], data: bytes | None = None
    ) -> WatchEvent | None:
        """One value of the stream (``data``: its JSON, to find times without a walk)."""
        if "object" in record and "type" in record:
            type_ = record["type"]
            obj = record["object"]
            if type_ not in WATCH_TYPES:
                self.maker.errors.append(LineError(line, f"unknown watch event type {type_!r}"))
                return None
        else:
            obj = record
            type_ = None
        if type_ == "BOOKMARK" or type_ == "ERROR":
            return self._passthrough(line, type_, obj)
        if not self.maker.wanted(obj, line):
            return None
        obj = normalise(obj)
        if type_ is None:
            type_ = "MODIFIED" if _identity(obj) in self.seen else "ADDED"
        self.seen.add(_identity(obj))
        return self.maker.make(self._time(obj, data), type_, obj, line)

    def _passthrough(self, line: int, type_: str, obj: Any) -> WatchEvent | None:
        if not isinstance(obj, dict):
            self.maker.errors.append(LineError(line, "missing or non-object 'object'"))
            return None
        at = self.last if self.last is not None else 0.0
        return self.maker.make(at, type_, obj, line)

    def _time(self, obj: dict[str, Any], data: bytes | None) -> float:
        own = newest_time_in_bytes(data) if data is not None else newest_time(obj)
        requested = deletion_requested_at(obj)
        if requested is not None and (own is None or requested > own):
            own = requested
        at = own + HALF_SECOND if own is not None else None
        if at is None or (self.last is not None and at < self.last):
            at = self.last if self.last is not None else 0.0
        self.last = at
        return at


def _identity(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    uid = meta.get("uid")
    if uid:
        return str(uid)
    return f"{obj.get('kind')}/{meta.get('namespace', '')}/{meta.get('name', '')}"


def stream_events(stream: WatchStream, values: Iterator[tuple[int, Any]]) -> Iterator[WatchEvent]:
    for line, record in values:
        if not isinstance(record, dict):
            stream.maker.errors.append(LineError(line, "not a JSON object"))
            continue
        event = stream.take(line, record)
        if event is not None:
            yield event
