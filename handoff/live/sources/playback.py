"""A trace file as a source (``manage.py replay``): its lines into the cluster's stream, in
order, at the recorded pace times ``speed`` or as fast as Redis takes them."""

from __future__ import annotations

import gzip
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import redis

from handoff.core.redact import scrub
from handoff.core.trace import GZIP_MAGIC, TraceReader, WatchEvent
from handoff.interop.importers import ImportReader, is_trace_file, open_events
from handoff.live import store

Progress = Callable[[int, float], object]  # (lines sent, fraction of the file read)


def replay(
    client: redis.Redis,
    cluster: str,
    path: str | Path,
    speed: float | None = None,
    batch: int = 1000,
    progress: Progress | None = None,
    sleep: Callable[[float], object] = time.sleep,
) -> TraceReader | ImportReader:
    """Append every watch event of the trace, scrubbed, with its other fields as recorded.

    Lines keep their recorded ``observed`` times: the timelines are those of the incident,
    whenever it is replayed.
    """
    if not is_trace_file(path):
        # kubectl output, a watch stream, an audit log: the importers' trace v1 lines.
        return _send(
            client, cluster, open_events(path, kinds=None), None, speed, batch, progress, sleep
        )
    size = max(1, Path(path).stat().st_size)
    with open(path, "rb") as raw:
        stream = gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == GZIP_MAGIC else raw
        reader = TraceReader(stream, kinds=None)
        _send(client, cluster, reader, lambda: raw.tell() / size, speed, batch, progress, sleep)
    return reader


def _send(
    client: redis.Redis,
    cluster: str,
    reader: TraceReader | ImportReader,
    fraction: Callable[[], float] | None,
    speed: float | None,
    batch: int,
    progress: Progress | None,
    sleep: Callable[[float], object],
) -> TraceReader | ImportReader:
    pending: list[bytes] = []
    sent = 0
    for event in _paced(reader, speed, sleep):
        if event.raw is not None:
            pending.append(_scrubbed(event.raw))
        if len(pending) >= batch or speed is not None:
            sent += _flush(client, cluster, pending)
            if progress is not None and fraction is not None:
                progress(sent, fraction())
    sent += _flush(client, cluster, pending)
    if progress is not None:
        progress(sent, 1.0)
    return reader


def _scrubbed(raw: bytes) -> bytes:
    """The line with its object scrubbed, like every object any source stores."""
    record = orjson.loads(raw)
    if isinstance(record.get("object"), dict):
        scrub(record["object"])
    return orjson.dumps(record)


def _flush(client: redis.Redis, cluster: str, lines: list[bytes]) -> int:
    if not lines:
        return 0
    pipe = client.pipeline(transaction=False)
    store.append(pipe, cluster, lines)
    pipe.execute()
    count = len(lines)
    lines.clear()
    return count


def _paced(
    reader: TraceReader | ImportReader, speed: float | None, sleep: Callable[[float], object]
) -> Iterator[WatchEvent]:
    origin: tuple[float, float] | None = None
    for event in reader:
        if speed is not None:
            at = event.time()
            if origin is None:
                origin = (at, time.monotonic())
            delay = origin[1] + (at - origin[0]) / speed - time.monotonic()
            if delay > 0:
                sleep(delay)
        yield event
