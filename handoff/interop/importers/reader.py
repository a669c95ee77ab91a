"""Read what operators already have as watch events: trace v1, ``kubectl get -o json``
snapshots (Lists, arrays, YAML), ``kubectl get -w`` streams, and kube-apiserver audit logs.

``open_events(path)`` is a drop-in for ``handoff.core.trace.TraceReader``: iterate it for
``WatchEvent``s (each with ``raw``, a trace v1 line, for replay and recording), then read
``errors`` (line-numbered), ``skipped`` (kind → count), ``header`` and ``lines_read``.
The format is found from the content, never the file name; gzip is read anywhere.
docs/interop.md describes each format, its mapping and the precision of its times.
"""

from __future__ import annotations

import heapq
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from handoff.core.trace import (
    HEADER_KEY,
    LineError,
    TraceHeader,
    TraceReader,
    WatchEvent,
    open_binary,
)
from handoff.interop.importers.audit import AuditLog, is_audit_event
from handoff.interop.importers.lists import Snapshot, load_yaml
from handoff.interop.importers.objects import KINDS, EventMaker
from handoff.interop.importers.values import Input, Progress, Value, lines_of, parse, split_values
from handoff.interop.importers.watch import WatchStream

# Concurrent requests reach an audit log slightly out of stageTimestamp order.
AUDIT_REORDER_WINDOW = 5.0
FORMATS = ("trace", "audit", "watch", "snapshot", "yaml", "empty")


class ImportReader:
    """Iterate the watch events of any supported input; report like ``TraceReader``.

    ``format`` is known once iteration has started: ``trace``, ``audit``, ``watch``,
    ``snapshot``, ``yaml`` or ``empty``.
    """

    def __init__(
        self,
        source: str | Path | IO[bytes],
        on_progress: Progress | None = None,
        kinds: frozenset[str] | None = KINDS,
    ) -> None:
        self.source = source
        self.on_progress = on_progress
        self.kinds = kinds
        self.header: TraceHeader | None = None
        self.errors: list[LineError] = []
        self.skipped: Counter[str] = Counter()
        self.lines_read = 0
        self.format: str | None = None

    def __iter__(self) -> Iterator[WatchEvent]:
        opened = Input(self.source, self.on_progress)
        try:
            yield from self._read(opened)
        finally:
            self.lines_read = opened.lines_read
            self.errors.extend(opened.errors)
            self.errors.sort(key=lambda error: error.line)
            opened.close()

    def _read(self, opened: Input) -> Iterator[WatchEvent]:
        chunks = opened.chunks()
        head = b""
        for chunk in chunks:
            head += chunk
            if head.strip():
                break
        first = head.lstrip()[:1]
        if not first:
            self.format = "empty"
            return
        everything = _chain([head], chunks)
        if first not in (b"{", b"["):
            yield from self._yaml(everything)
            return
        kind_of_input = _classify(head)
        if kind_of_input == "trace":
            yield from self._trace(lines_of(everything))
        elif kind_of_input == "snapshot":
            yield from self._snapshot(split_values(everything, self.errors))
        else:
            yield from self._streamed(kind_of_input, split_values(everything, self.errors))

    def _trace(self, lines: Iterator[bytes]) -> Iterator[WatchEvent]:
        """Trace v1 read by TraceReader itself: the same checks, line for line."""
        self.format = "trace"
        reader = TraceReader(lines, kinds=self.kinds)
        for event in reader:
            self.header = reader.header  # read with line 1, before any event
            yield event
        self.header = reader.header
        self.errors.extend(reader.errors)
        self.skipped.update(reader.skipped)

    def _snapshot(self, values: Iterable[Value]) -> Iterator[WatchEvent]:
        self.format = "snapshot"
        snapshot = Snapshot(EventMaker(self.errors, self.skipped, self.kinds))
        for value in values:
            snapshot.add_json(value)
        yield from snapshot.events()

    def _yaml(self, lines: Iterator[bytes]) -> Iterator[WatchEvent]:
        self.format = "yaml"
        data = b"".join(lines)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = data.count(b"\n", 0, exc.start) + 1
            self.errors.append(LineError(line, f"not UTF-8 (byte {exc.start}): {exc.reason}"))
            text = data.decode("utf-8", "replace")
        snapshot = Snapshot(EventMaker(self.errors, self.skipped, self.kinds))
        for line, document in load_yaml(text, self.errors):
            if document is not None and not isinstance(document, dict | list):
                self.errors.append(LineError(line, "YAML document is not an object or a list"))
                continue
            snapshot.add_document(line, document)
        yield from snapshot.events()

    def _streamed(self, kind_of_input: str, values: Iterable[Value]) -> Iterator[WatchEvent]:
        self.format = kind_of_input
        maker = EventMaker(self.errors, self.skipped, self.kinds)
        audit = AuditLog(maker)
        watch = WatchStream(maker)
        reorder = Reorder(AUDIT_REORDER_WINDOW)
        for value in values:
            if not value.complete:
                continue  # reported by the splitter
            record = parse(value, self.errors)
            if record is None:
                continue
            if not isinstance(record, dict):
                self.errors.append(LineError(value.line, "not a JSON object"))
                continue
            if is_audit_event(record):
                for event in audit.take(value.line, record):
                    yield from reorder.push(event)
            elif kind_of_input == "audit":
                self.skipped["not an audit event"] += 1
            else:
                event = watch.take(value.line, record, value.data)
                if event is not None:
                    yield event
        yield from reorder.drain()


def _classify(head: bytes) -> str:
    """The kind of input, from its first chunk: its first value when that is whole in it,
    else markers near the start (a value bigger than a chunk is a List)."""
    if head.lstrip()[:1] == b"[":
        return "snapshot"
    scratch: list[LineError] = []
    first = next(split_values([head], scratch), None)
    record = parse(first, scratch) if first is not None and first.complete else None
    if isinstance(record, dict):
        if HEADER_KEY in record or ("observed" in record and "object" in record):
            return "trace"
        if is_audit_event(record):
            return "audit"
        return "snapshot" if "items" in record else "watch"
    start = head[:65536]
    if _TRACE_MARK.search(start):
        return "trace"
    if _AUDIT_MARK.search(start):
        return "audit"
    return "snapshot" if first is not None and not first.complete else "watch"


_TRACE_MARK = re.compile(rb'^\s*\{\s*"(?:handoff_trace|observed)"')
_AUDIT_MARK = re.compile(rb'"apiVersion"\s*:\s*"audit\.k8s\.io/')


def open_events(
    path: str | Path | IO[bytes],
    on_progress: Progress | None = None,
    kinds: frozenset[str] | None = KINDS,
) -> ImportReader | TraceReader:
    """Any supported input as watch events; see ``ImportReader``.

    A trace v1 file (the common case, and the large one) is handed to ``TraceReader``
    itself, which reads the file through its own buffer about 40% faster than the
    importers' chunk splitting; both report alike (``format`` is "trace")."""
    if on_progress is None and isinstance(path, str | Path) and is_trace_file(path):
        return TraceReader(path, kinds=kinds)
    return ImportReader(path, on_progress, kinds)


def is_trace_file(path: str | Path) -> bool:
    """Whether a file (gzipped or not) is trace v1, from its first 64 KiB."""
    try:
        with open_binary(path) as stream:
            head = stream.read(65536)
    except (OSError, EOFError, zlib.error):
        return False  # the importers report it, line-numbered
    return bool(head.strip()) and _classify(head) == "trace"


class Reorder:
    """Events put back in observed order, holding at most ``window`` seconds of them."""

    def __init__(self, window: float) -> None:
        self.window = window
        self.heap: list[tuple[float, int, WatchEvent]] = []
        self.count = 0
        self.newest = float("-inf")

    def push(self, event: WatchEvent) -> Iterator[WatchEvent]:
        at = event.time()
        self.count += 1
        heapq.heappush(self.heap, (at, self.count, event))
        self.newest = max(self.newest, at)
        while self.heap and self.heap[0][0] < self.newest - self.window:
            yield heapq.heappop(self.heap)[2]

    def drain(self) -> Iterator[WatchEvent]:
        while self.heap:
            yield heapq.heappop(self.heap)[2]


def _chain(first: Iterable[Any], rest: Iterator[Any]) -> Iterator[Any]:
    yield from first
    yield from rest


__all__ = ["FORMATS", "ImportReader", "Progress", "open_events"]
