"""``kubectl get pods,events,nodes -A -o json`` (one List, several Lists one after another,
bare JSON arrays of objects) and the same as YAML: a snapshot, read as a list.

A snapshot has no receive times. Every object becomes an ``ADDED`` observed at the
snapshot's time: its newest past timestamp (condition transitions, node heartbeats, event
times, creations) plus ``LIST_MARGIN``. The fold then dates every fact from the object's own
1-second timestamp, because it is more than a second older than the list
(docs/trace-format.md, "Times"); facts without a timestamp of their own (a ``hostIP``
alone) date from the list, an upper bound.

Inputs are held as bytes while their newest time is found (one regular-expression pass);
items are parsed one at a time, so a 1.5 GB List needs about its size in memory, not the
several times that parsing it whole would.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import orjson

from handoff.core.trace import LineError, WatchEvent
from handoff.interop.importers.objects import (
    EventMaker,
    newest_time,
    newest_time_in_bytes,
    normalise,
)
from handoff.interop.importers.values import Value, parse, raw_items, salvage

_SEPARATORS = re.compile(rb"[\s,]*")
LIST_MARGIN = 2.0  # seconds after the newest timestamp: > 1 s so own timestamps are used


class Snapshot:
    """Collects snapshot values (JSON or YAML documents), then yields their objects."""

    def __init__(self, maker: EventMaker) -> None:
        self.maker = maker
        self.errors = maker.errors
        self.values: list[Value] = []
        self.documents: list[tuple[int, Any]] = []
        self.newest: float | None = None

    def add_json(self, value: Value) -> None:
        self.values.append(value)
        self.newest = newest_time_in_bytes(value.data, self.newest)

    def add_document(self, line: int, document: Any) -> None:
        self.documents.append((line, document))
        self.newest = newest_time(document, self.newest)

    def time(self) -> float:
        return (self.newest or 0.0) + LIST_MARGIN

    def events(self) -> Iterator[WatchEvent]:
        at = self.time()
        for value in self.values:
            yield from self._json_value(value, at)
        for line, document in self.documents:
            yield from self._document(line, document, at)

    def _json_value(self, value: Value, at: float) -> Iterator[WatchEvent]:
        if not value.complete:
            for line, data in salvage(value):
                yield from self._item(line, data, at)
            return
        items = raw_items(value)
        if items is not None:
            offset, line = 0, value.line
            for index, item in enumerate(items):
                data = bytes(item)
                # Items follow each other with only commas and blanks between: find the
                # first, then step over separators (searching 1.5 GB again would not do).
                if index == 0:
                    found = value.data.find(data)
                else:
                    found = _SEPARATORS.match(value.data, offset).end()
                    if not value.data.startswith(data, found):
                        found = value.data.find(data, offset)
                if found >= 0:
                    line += value.data.count(b"\n", offset, found)
                    yield from self._item(line, data, at)
                    line += data.count(b"\n")
                    offset = found + len(data)
                else:
                    yield from self._item(line, data, at)
            return
        parsed = parse(value, self.errors)
        if parsed is None:
            for line, data in salvage(value):
                yield from self._item(line, data, at)
            return
        yield from self._document(value.line, parsed, at)

    def _item(self, line: int, data: bytes, at: float) -> Iterator[WatchEvent]:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            self.errors.append(LineError(line + exc.lineno - 1, f"not JSON: {exc.msg}"))
            return
        yield from self._object(line, obj, at)

    def _document(self, line: int, document: Any, at: float) -> Iterator[WatchEvent]:
        if isinstance(document, list):
            for item in document:
                yield from self._object(line, item, at)
        elif isinstance(document, dict) and isinstance(document.get("items"), list):
            for item in document["items"]:
                yield from self._object(line, item, at)
        elif document is not None:
            yield from self._object(line, document, at)

    def _object(self, line: int, obj: Any, at: float) -> Iterator[WatchEvent]:
        if isinstance(obj, dict) and isinstance(obj.get("items"), list):
            yield from self._document(line, obj, at)  # a List inside an array
            return
        if not self.maker.wanted(obj, line):
            return
        event = self.maker.make(at, "ADDED", normalise(obj), line)
        if event is not None:
            yield event


def load_yaml(text: str, errors: list[LineError]) -> Iterator[tuple[int, Any]]:
    """YAML documents with the line each starts on; a syntax error ends the input there."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            yield node.start_mark.line + 1, loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        if mark is not None:
            line = mark.line + 1
        else:  # a reader error (a control character, bad encoding) knows only its offset
            line = text.count("\n", 0, getattr(exc, "position", 0) or 0) + 1
        errors.append(LineError(line, f"not YAML: {getattr(exc, 'problem', None) or exc}"))
    except RecursionError:
        errors.append(LineError(1, "not YAML this reader can take: nested too deeply"))
    finally:
        loader.dispose()
