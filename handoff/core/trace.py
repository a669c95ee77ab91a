"""Trace format v1: JSON Lines of watch events, optionally gzip-compressed.

A trace is what a watcher saw, in the order it saw it. The first line may be a
header ``{"handoff_trace": 1, "cluster": ..., "source": ...}``; every other line
is ``{"observed": RFC 3339, "type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
"object": {...}}`` with an optional ``"cluster"``. See docs/trace-format.md.

Reading never raises on a bad line: the line is reported (with its number) and
skipped, so one corrupt line does not cost the rest of an incident.
"""

from __future__ import annotations

import gzip
import io
import math
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson

from handoff.core.schema import (
    LINE_DECODER,
    SECONDS,
    DecodeError,
    KubeObject,
    ValidationError,
    note_second,
    to_object,
)

TRACE_VERSION = 1
HEADER_KEY = "handoff_trace"
WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
GZIP_MAGIC = b"\x1f\x8b"
MAX_LINE_BYTES = 64 * 1024 * 1024
READ_BUFFER = 1 << 20


class WatchEvent(msgspec.Struct):
    """One line of a trace: what the watcher received, and when.

    ``object`` is the part of the Kubernetes object Handoff reads
    (``schema.KubeObject``) when it comes from a reader, or a plain dict when a
    caller builds one; ``raw`` is the line as read, for replay and recording.
    A struct rather than a dataclass: one is made per line, and a struct is
    built in C.
    """

    observed: str
    type: str
    object: KubeObject | dict[str, Any]
    cluster: str | None = None
    line: int = 0
    at: float | None = None  # ``observed`` as epoch seconds, when the reader parsed it
    raw: bytes | None = None

    def time(self) -> float:
        return self.at if self.at is not None else parse_time(self.observed)


@dataclass(slots=True)
class TraceHeader:
    version: int = TRACE_VERSION
    cluster: str | None = None
    source: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class LineError:
    line: int
    message: str

    def __str__(self) -> str:
        # One line, whatever the parser's message held (YAML's span several).
        return f"line {self.line}: {' '.join(self.message.split())}"


class TraceError(Exception):
    """Nothing usable could be read from a trace."""


def format_time(moment: datetime | float) -> str:
    """RFC 3339 UTC with microseconds, the form every ``observed`` field uses."""
    if isinstance(moment, datetime):
        moment = moment.timestamp()
    seconds = math.floor(moment)
    micros = round((moment - seconds) * 1_000_000)
    if micros == 1_000_000:
        seconds, micros = seconds + 1, 0
    return f"{_utc_second(seconds)}.{micros:06d}Z"


@lru_cache(maxsize=65536)
def _utc_second(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def observed_time(text: str) -> float | None:
    """``observed`` as epoch seconds. Consecutive lines share their second, so
    the common form (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) is read from a cache of
    seconds plus the fraction; anything else takes the full parser."""
    if len(text) == 27 and text[19] == "." and text[26] == "Z":
        second = SECONDS.get(text[:19])
        fraction = text[20:26]
        if second is not None and fraction.isascii() and fraction.isdigit():
            # float() of six ASCII digits is exact and cheaper than int(); the
            # quotient is the same correctly rounded double either way.
            return second + float(fraction) / 1_000_000
    try:
        moment = _rfc3339(text)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    note_second(text, moment)
    return moment.timestamp()


def _rfc3339(text: str) -> datetime:
    # fromisoformat also takes a bare date or a week date: not a moment, so refused.
    if len(text) < 19 or text[10] not in "Tt ":
        raise ValueError(f"not an RFC 3339 date-time: {text[:40]!r}")
    return datetime.fromisoformat(text.upper())  # RFC 3339 allows a lowercase t and z


def parse_time(text: str) -> float:
    """Epoch seconds from an RFC 3339 timestamp (``Z`` or offset, any fraction)."""
    moment = _rfc3339(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a trace for reading, gunzipping when the file starts with gzip's magic."""
    # A large buffer: a trace is read front to back, a line is ~1-2 KB, and fewer
    # reads make each line cheaper.
    raw = open(path, "rb", buffering=READ_BUFFER)  # noqa: SIM115 - the caller closes it
    if raw.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    return raw


class TraceReader:
    """Iterate the watch events of a trace, collecting per-line errors and skipped kinds.

    ``kinds`` limits which object kinds are yielded; others are counted in
    ``skipped`` under their kind.
    """

    format = "trace"  # what the importers call this input (handoff.interop.importers.open_events)

    def __init__(
        self,
        source: str | Path | IO[bytes] | Iterable[bytes],
        kinds: frozenset[str] | None = frozenset({"Pod", "Node", "Event"}),
    ) -> None:
        self.source = source
        self.kinds = kinds
        self.header: TraceHeader | None = None
        self.errors: list[LineError] = []
        self.skipped: Counter[str] = Counter()
        self.lines_read = 0

    def __iter__(self) -> Iterator[WatchEvent]:
        return self._read(self.source)

    def feed(self, handle: Callable[[float, str, KubeObject], object]) -> None:
        """Read the whole trace, calling ``handle(at, type, object)`` for each event
        iteration would yield, with the same checks and reports.

        The fold's way in: no ``WatchEvent`` per line (the fold reads neither the
        line nor its number) and no generator switch per line.
        """
        for _ in self._read(self.source, handle):
            pass

    def feed_numbered(
        self,
        numbered: Iterable[tuple[int, bytes]],
        handle: Callable[[float, str, KubeObject], object],
    ) -> None:
        """``feed`` of some of the trace's lines, each with its line number: a worker of
        a parallel triage (``offline.fanout``) folds only its share, and its errors
        still name the lines of the whole file."""
        for _ in self._read(self.source, handle, numbered):
            pass

    def _read(
        self,
        source: str | Path | IO[bytes] | Iterable[bytes],
        handle: Callable[[float, str, KubeObject], object] | None = None,
        numbered: Iterable[tuple[int, bytes]] | None = None,
    ) -> Iterator[WatchEvent]:
        """The hot loop: well-formed event lines decode straight into the schema,
        anything else goes through ``_parse_line``, which says what is wrong.
        One generator, opening (and closing) a path itself: a ``yield from``
        layer costs a little on every line. With ``handle`` (``feed``), events
        go to it instead and nothing is yielded."""
        opened = None
        if numbered is None:
            opened = open_binary(source) if isinstance(source, str | Path) else None
            stream: Iterable[bytes] = source if opened is None else opened
            numbered = enumerate(stream, 1)
        number = 0
        decode, kinds, types = LINE_DECODER.decode, self.kinds, WATCH_TYPES
        seconds = SECONDS
        # The second of the previous line ("YYYY-MM-DDTHH:MM:SS.", 20 characters) and
        # its epoch seconds: consecutive lines mostly share it.
        prefix, second = "\0", 0.0
        try:
            for number, raw in numbered:
                try:
                    line = decode(raw) if len(raw) <= MAX_LINE_BYTES else None
                except (DecodeError, RecursionError):
                    line = None
                if (
                    line is not None
                    and (obj := line.object) is not None
                    and (type_ := line.type) in types
                ):
                    observed = line.observed
                    # observed_time's common case, inlined: one call less per line.
                    if (
                        observed is not None
                        and observed.startswith(prefix)
                        and len(observed) == 27
                        and observed[26] == "Z"
                        and (fraction := observed[20:26]).isascii()
                        and fraction.isdigit()
                    ):
                        at = second + float(fraction) / 1_000_000  # see observed_time
                    else:
                        at = observed_time(observed) if observed is not None else None
                        if at is not None and (cached := seconds.get(observed[:19])) is not None:
                            prefix, second = f"{observed[:19]}.", cached
                    if at is not None and (
                        kinds is None or obj.kind in kinds or type_ == "BOOKMARK"
                    ):
                        if handle is not None:
                            handle(at, type_, obj)
                        else:
                            yield WatchEvent(observed, type_, obj, line.cluster, number, at, raw)
                        continue
                # Anything else the slow way, which says what is wrong with it.
                event = self._parse_line(number, raw)
                if event is not None:
                    if handle is not None:
                        handle(event.time(), event.type, event.object)
                    else:
                        yield event
        except (EOFError, OSError, zlib.error) as exc:
            self.errors.append(LineError(number + 1, f"stream ended early: {exc}"))
        finally:
            self.lines_read = number
            if opened is not None:
                opened.close()

    def _parse_line(self, number: int, raw: bytes) -> WatchEvent | None:
        if not raw.strip():
            return None
        if len(raw) > MAX_LINE_BYTES:
            self.errors.append(LineError(number, f"line longer than {MAX_LINE_BYTES} bytes"))
            return None
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            self.errors.append(LineError(number, f"not JSON: {exc}"))
            return None
        if not isinstance(record, dict):
            self.errors.append(LineError(number, "not a JSON object"))
            return None
        if HEADER_KEY in record:
            return self._take_header(number, record)
        return self._take_event(number, record, raw)

    def _take_header(self, number: int, record: dict[str, Any]) -> None:
        version = record.get(HEADER_KEY)
        if version != TRACE_VERSION:
            self.errors.append(LineError(number, f"unsupported trace version {version!r}"))
            return None
        if self.header is not None:
            self.errors.append(LineError(number, "second header ignored"))
            return None
        extra = {k: v for k, v in record.items() if k not in (HEADER_KEY, "cluster", "source")}
        self.header = TraceHeader(
            TRACE_VERSION, _opt_str(record.get("cluster")), _opt_str(record.get("source")), extra
        )
        return None

    def _take_event(self, number: int, record: dict[str, Any], raw: bytes) -> WatchEvent | None:
        kind_of_event = record.get("type")
        observed = record.get("observed")
        obj = record.get("object")
        problem = _event_problem(kind_of_event, observed, obj)
        if isinstance(problem, str):
            self.errors.append(LineError(number, problem))
            return None
        kind = obj.get("kind") or "<no kind>"
        if not isinstance(kind, str):
            self.errors.append(LineError(number, "the object's 'kind' is not a string"))
            return None
        if kind_of_event != "BOOKMARK" and self.kinds is not None and kind not in self.kinds:
            self.skipped[str(kind)] += 1
            return None
        try:
            typed = to_object(obj)
        except ValidationError as exc:
            self.errors.append(LineError(number, f"unexpected {kind} shape: {exc}"))
            return None
        cluster = _opt_str(record.get("cluster"))
        return WatchEvent(observed, kind_of_event, typed, cluster, number, problem, raw)


def _event_problem(kind_of_event: Any, observed: Any, obj: Any) -> str | float:
    """What is wrong with a record, or (when nothing is) its observed time."""
    if not isinstance(kind_of_event, str) or kind_of_event not in WATCH_TYPES:
        return f"unknown watch event type {str(kind_of_event)[:40]!r}"
    if not isinstance(observed, str):
        return "missing or non-string 'observed'"
    try:
        at = parse_time(observed)
    except ValueError:
        return f"'observed' is not an RFC 3339 time: {observed[:40]!r}"
    if not isinstance(obj, dict):
        return "missing or non-object 'object'"
    return at


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class TraceWriter:
    """Write trace v1 lines; gzip when the path ends in ``.gz``."""

    def __init__(
        self, target: str | Path | IO[bytes], cluster: str | None = None, source: str | None = None
    ) -> None:
        self._raw: IO[bytes] | None = None
        if isinstance(target, str | Path):
            path = Path(target)
            self._raw = open(path, "wb")  # noqa: SIM115 - closed in close()
            # No file name and mtime=0 in the gzip header: recordings of the same
            # run are byte-identical whatever they are called.
            gzipped = path.name.endswith(".gz")
            self._stream: IO[bytes] = (
                gzip.GzipFile(filename="", fileobj=self._raw, mode="wb", mtime=0)
                if gzipped
                else self._raw
            )
        else:
            self._stream = target
        header: dict[str, Any] = {HEADER_KEY: TRACE_VERSION}
        if cluster is not None:
            header["cluster"] = cluster
        if source is not None:
            header["source"] = source
        self._stream.write(orjson.dumps(header) + b"\n")

    def write(
        self, observed: str, type_: str, obj: dict[str, Any], cluster: str | None = None
    ) -> None:
        self._stream.write(encode_event(observed, type_, obj, cluster))

    def write_line(self, line: bytes) -> None:
        """An already-encoded event line (from a stream), written as is."""
        self._stream.write(line if line.endswith(b"\n") else line + b"\n")

    def close(self) -> None:
        self._stream.flush()
        if self._raw is not None:
            if self._stream is not self._raw:
                self._stream.close()
            self._raw.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def encode_event(
    observed: str, type_: str, obj: dict[str, Any], cluster: str | None = None
) -> bytes:
    """One trace line, newline included."""
    record: dict[str, Any] = {"observed": observed, "type": type_, "object": obj}
    if cluster is not None:
        record["cluster"] = cluster
    return orjson.dumps(record) + b"\n"


def read_all(source: str | Path | bytes) -> tuple[list[WatchEvent], TraceReader]:
    """Convenience for tests and small traces: every event plus the reader's report."""
    reader = TraceReader(io.BytesIO(source) if isinstance(source, bytes) else source)
    return list(reader), reader
