"""Bytes in, JSON values out: gzip by magic bytes, progress by bytes read, and the
values of a file split without assuming one per line.

``kubectl get -w -o json`` prints pretty-printed objects one after another (not one per
line), ``kubectl get -o json`` one indented List, audit logs one object per line. The
splitter accumulates lines and tries to parse only where a value can end: a line that
closes at column 0 (an indented value's last line) or a single line that is a whole
value. A value that never closes is reported when the next one starts at column 0.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson

from handoff.core.trace import GZIP_MAGIC, LineError

Progress = Callable[[int, int | None], object]  # (bytes read, total bytes or None)
CHUNK = 1 << 20  # bytes read at a time; progress is reported once per chunk


class _Envelope(msgspec.Struct):
    """The outside of a List: its items stay raw bytes until each is read."""

    items: list[msgspec.Raw] | None = None


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])


@dataclass(slots=True)
class Value:
    """One top-level JSON value: where it starts and its bytes."""

    line: int
    data: bytes
    complete: bool = True  # False: the input ended inside it (its items may be salvaged)


class Input:
    """An opened input: its (decompressed) bytes in chunks, with progress by compressed
    bytes read. A gzip stream that breaks off is reported, not raised."""

    def __init__(self, source: str | Path | IO[bytes], on_progress: Progress | None) -> None:
        self.on_progress = on_progress
        self._owned: IO[bytes] | None = None
        if isinstance(source, str | Path):
            raw: Any = open(source, "rb")  # noqa: SIM115 - closed in close()
            self._owned = raw
            self.total: int | None = os.fstat(raw.fileno()).st_size
        else:
            raw = source
            self.total = None
        self._raw = raw
        head = _peek(raw)
        self.gzipped = head == GZIP_MAGIC
        self.stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb") if self.gzipped else raw
        self.errors: list[LineError] = []
        self.lines_read = 0

    def position(self) -> int:
        try:
            return self._raw.tell()
        except (OSError, ValueError, AttributeError):
            return 0

    def chunks(self) -> Iterator[bytes]:
        """About CHUNK bytes at a time. Read with ``read1`` so that a gzip stream cut
        short still gives everything decompressed before the break."""
        read = getattr(self.stream, "read1", self.stream.read)
        newlines = 0
        ended_on_newline = True
        pieces: list[bytes] = []
        size = 0
        failure: Exception | None = None
        while True:
            try:
                piece = read(CHUNK)
            except (EOFError, OSError, zlib.error) as exc:
                piece, failure = b"", exc
            if piece:
                pieces.append(piece)
                size += len(piece)
                if size < CHUNK:
                    continue
            if pieces:
                chunk = b"".join(pieces)
                pieces, size = [], 0
                newlines += chunk.count(b"\n")
                ended_on_newline = chunk.endswith(b"\n")
                if self.on_progress is not None:
                    self.on_progress(self.position(), self.total)
                yield chunk
            if not piece:
                break
        self.lines_read = newlines + (0 if ended_on_newline else 1)
        if failure is not None:
            self.errors.append(
                LineError(
                    self.lines_read + 1,
                    f"stream ended early (compressed byte {self.position()}): {failure}",
                )
            )

    def close(self) -> None:
        if self.gzipped:
            self.stream.close()
        if self._owned is not None:
            self._owned.close()


def lines_of(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Chunks as lines (newline kept), for readers that go line by line."""
    partial = b""
    for chunk in chunks:
        pieces = (partial + chunk).split(b"\n")
        partial = pieces.pop()
        for piece in pieces:
            yield piece + b"\n"
    if partial:
        yield partial


def _peek(raw: Any) -> bytes:
    """The first two bytes, left in the stream (seeking back, or from the read buffer)."""
    if hasattr(raw, "peek"):
        return raw.peek(2)[:2]
    if raw.seekable():
        at = raw.tell()
        head = raw.read(2)
        raw.seek(at)
        return head
    return b""


# A line that starts with a bracket at column 0 is the first or last line of an indented
# value, or a whole one-line value; lines inside an indented value never start so. The
# search is for a newline followed by a bracket: a literal first byte, which the regular
# expression engine finds at memchr speed.
_EDGE = re.compile(rb"\n[{}\[\]]")


def _edges(buffer: bytearray, scan: int, end: int) -> Iterator[int]:
    """Offsets in [scan, end) of lines starting with a bracket (scan is a line start)."""
    if scan < end and buffer[scan : scan + 1] in (b"{", b"}", b"[", b"]"):
        yield scan
    for match in _EDGE.finditer(buffer, scan, end):
        if match.start() + 1 < end:
            yield match.start() + 1


class _Scanner:
    """Line numbers of offsets in a buffer that only grows at the end and is cut at the
    front; offsets are asked for in increasing order."""

    def __init__(self) -> None:
        self.line = 1
        self.offset = 0

    def line_at(self, buffer: bytearray, offset: int) -> int:
        self.line += buffer.count(b"\n", self.offset, offset)
        self.offset = offset
        return self.line


def split_values(chunks: Iterable[bytes], errors: list[LineError]) -> Iterator[Value]:
    """Concatenated JSON values (one per line, or pretty-printed), with their first line.

    A value opens at a line starting with ``{`` or ``[`` at column 0 and closes at the
    next line starting with ``}`` or ``]`` there (or on the same line). Non-blank text
    outside values is reported; so is a value still open when another opens or the input
    ends (that one is yielded with ``complete=False``).
    """
    buffer = bytearray()
    lines = _Scanner()
    open_at: int | None = None
    open_line = 0
    done = 0  # end of the last value (or garbage) dealt with
    scan = 0
    for chunk in _with_end(chunks):
        final = chunk is None
        if not final:
            buffer += chunk
        end = len(buffer) if final else buffer.rfind(b"\n", scan) + 1
        if end <= scan and not final:
            continue
        for start in _edges(buffer, scan, end):
            stop = buffer.find(b"\n", start, end)
            stop = end if stop < 0 else stop
            text = bytes(buffer[start:stop])
            if text[:1] in b"{[":
                if open_at is None:
                    _garbage(buffer, done, start, lines, errors)
                line = lines.line_at(buffer, start)
                if open_at is not None:
                    errors.append(
                        LineError(open_line, f"value at lines {open_line}-{line - 1} never closes")
                    )
                    open_at, done = None, start
                if text.rstrip()[-1:] in (b"}", b"]"):
                    yield Value(line, bytes(buffer[start:stop]))
                    done = stop
                else:
                    open_at, open_line = start, line
            elif open_at is not None:
                yield Value(open_line, bytes(buffer[open_at:stop]))
                open_at, done = None, stop
        scan = max(scan, end)
        if final:
            break
        keep = open_at if open_at is not None else done
        if keep > 0:
            lines.line_at(buffer, keep)
            del buffer[:keep]
            lines.offset -= keep
            scan -= keep
            done = 0 if open_at is None else done - keep
            if open_at is not None:
                open_at = 0
    if open_at is not None:
        last = lines.line_at(buffer, len(buffer))
        errors.append(
            LineError(open_line, f"value at lines {open_line}-{last} is cut off at the end")
        )
        yield Value(open_line, bytes(buffer[open_at:]), complete=False)
    else:
        _garbage(buffer, done, len(buffer), lines, errors)


def _with_end(chunks: Iterable[bytes]) -> Iterator[bytes | None]:
    yield from chunks
    yield None


def _garbage(
    buffer: bytearray, start: int, stop: int, lines: _Scanner, errors: list[LineError]
) -> None:
    """Report non-blank text between values (it is no JSON value)."""
    text = bytes(buffer[start:stop])
    stripped = text.lstrip()
    if not stripped:
        return
    offset = start + len(text) - len(stripped)
    line = lines.line_at(buffer, offset)
    snippet = stripped.split(b"\n", 1)[0][:40].decode("utf-8", "replace")
    errors.append(LineError(line, f"not JSON: {snippet!r}"))


def where(value: Value, offset: int) -> int:
    """The input line of a byte offset inside a value."""
    return value.line + value.data.count(b"\n", 0, max(0, offset))


def parse(value: Value, errors: list[LineError]) -> Any:
    """A value as Python data, or None after reporting why it is not JSON."""
    try:
        return orjson.loads(value.data)
    except orjson.JSONDecodeError as exc:
        line = value.line + max(0, exc.lineno - 1)
        errors.append(LineError(line, f"not JSON (column {exc.colno}): {exc.msg}"))
        return None


def raw_items(value: Value) -> list[msgspec.Raw] | None:
    """The items of a List or the elements of an array, still as bytes; None when the
    value is neither (or not valid JSON: the caller parses it to say why)."""
    data = value.data.lstrip()
    try:
        if data[:1] == b"[":
            return _ARRAY.decode(data)
        if b'"items"' in data:
            return _ENVELOPE.decode(data).items
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return None


def salvage(value: Value) -> Iterator[tuple[int, bytes]]:
    """The complete elements of the first array in a broken value (a List cut off at the
    end, one corrupt item): a slow tokenizer, only run when the fast decode failed."""
    data = value.data
    depth = 0
    array_depth = None
    element_start = None
    index = 0
    length = len(data)
    while index < length:
        char = data[index]
        if char == 0x22:  # '"'
            index = _string_end(data, index + 1)
            continue
        if char in (0x7B, 0x5B):  # '{' '['
            depth += 1
            if array_depth is None and char == 0x5B and depth <= 2:
                array_depth = depth
            elif array_depth is not None and depth == array_depth + 1:
                element_start = index
        elif char in (0x7D, 0x5D):  # '}' ']'
            if array_depth is not None and depth == array_depth + 1 and element_start is not None:
                yield where(value, element_start), data[element_start : index + 1]
                element_start = None
            if array_depth is not None and depth == array_depth:
                return
            depth -= 1
        index += 1


def _string_end(data: bytes, index: int) -> int:
    while True:
        quote = data.find(b'"', index)
        if quote < 0:
            return len(data)
        backslashes = 0
        while data[quote - 1 - backslashes] == 0x5C:
            backslashes += 1
        if backslashes % 2 == 0:
            return quote + 1
        index = quote + 1
