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
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson

from handoff.trace import GZIP_MAGIC, LineError

Progress = Callable[[int, int | None], object]  # (bytes read, total bytes or None)
PROGRESS_EVERY = 1 << 20  # report at most once per MiB read


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
    """An opened input: its (decompressed) lines, with progress by compressed bytes read."""

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
        self._reported = 0
        self.errors: list[LineError] = []
        self.lines_read = 0

    def position(self) -> int:
        try:
            return self._raw.tell()
        except (OSError, ValueError, AttributeError):
            return 0

    def lines(self) -> Iterator[bytes]:
        """The input's lines; a gzip stream that breaks off is reported, not raised."""
        number = 0
        try:
            for number, line in enumerate(self.stream, 1):
                if self.on_progress is not None and number % 1024 == 0:
                    self._progress()
                yield line
        except (EOFError, OSError, zlib.error) as exc:
            self.errors.append(
                LineError(
                    number + 1,
                    f"stream ended early (compressed byte {self.position()}): {exc}",
                )
            )
        finally:
            self.lines_read = number
            if self.on_progress is not None:
                self.on_progress(self.position(), self.total)

    def _progress(self) -> None:
        at = self.position()
        if at - self._reported >= PROGRESS_EVERY:
            self._reported = at
            self.on_progress(at, self.total)  # type: ignore[misc]

    def close(self) -> None:
        if self.gzipped:
            self.stream.close()
        if self._owned is not None:
            self._owned.close()


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


def split_values(lines: Iterator[bytes], errors: list[LineError]) -> Iterator[Value]:
    """Concatenated JSON values (one per line, or pretty-printed), with their first line."""
    buffer: list[bytes] = []
    start = 0
    number = 0
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        if not buffer:
            if not stripped:
                continue
            start = number
        elif line[:1] in b"{[":
            errors.append(LineError(start, f"value at lines {start}-{number - 1} never closes"))
            buffer, start = [], number
        buffer.append(line)
        closes = stripped[-1:] in (b"}", b"]")
        if closes and (len(buffer) == 1 or line[:1] in b"}]"):
            data = b"".join(buffer)
            buffer = []
            yield Value(start, data)
    if buffer and b"".join(buffer).strip():
        errors.append(LineError(start, f"value at lines {start}-{number} is cut off at the end"))
        yield Value(start, b"".join(buffer), complete=False)


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
    except (msgspec.DecodeError, msgspec.ValidationError):
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
