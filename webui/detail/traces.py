"""The traces the replay page can open: server-side files from one configured folder,
and uploads (size-limited, kept under their content hash). Never an arbitrary path: an id
names a file only after it was found in one of the two folders' listings."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import os
import re
import tempfile
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import orjson
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from handoff.core.redact import scrub
from handoff.core.trace import TraceWriter, open_binary
from handoff.interop.importers import open_events
from handoff.offline.replay import EmptyTrace, ReplayState
from webui import clusterdata
from webui.api import Refused
from webui.detail import replayed

FILE_PREFIX = "f-"
UPLOAD_PREFIX = "u-"
# A listed file's name: no separators, no leading dot, nothing a shell or URL could bend.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
TRACE_SUFFIXES = (".jsonl", ".jsonl.gz", ".json", ".gz", ".trace")
UPLOAD_SUFFIX = ".trace"


class TraceRejected(Refused):
    """An upload or a server-side trace file that is not a usable trace; the message says
    why (one line, the same for both)."""

    status = 400


class TraceTooLarge(TraceRejected):
    status = 413


@dataclass(frozen=True)
class TraceFile:
    id: str
    name: str
    path: Path
    size: int
    uploaded: bool


def _listing(folder: str | os.PathLike[str], prefix: str, uploaded: bool) -> list[TraceFile]:
    root = Path(folder)
    if not root.is_dir():
        return []
    found = []
    for entry in sorted(os.scandir(root), key=lambda e: e.name):
        if not SAFE_NAME.match(entry.name) or not entry.is_file(follow_symlinks=False):
            continue
        if uploaded != entry.name.endswith(UPLOAD_SUFFIX) or not entry.name.endswith(
            TRACE_SUFFIXES
        ):
            continue
        trace_id = prefix + (entry.name.removesuffix(UPLOAD_SUFFIX) if uploaded else entry.name)
        found.append(
            TraceFile(trace_id, entry.name, Path(entry.path), entry.stat().st_size, uploaded)
        )
    return found


def limit_text(limit: int) -> str:
    mb = 1024 * 1024
    return f"{limit // mb} MB" if limit % mb == 0 else f"{limit} byte"


def server_traces() -> list[TraceFile]:
    return _listing(settings.HANDOFF_REPLAY_DIR, FILE_PREFIX, uploaded=False)


def uploaded_traces() -> list[TraceFile]:
    return _listing(settings.HANDOFF_REPLAY_UPLOAD_DIR, UPLOAD_PREFIX, uploaded=True)


def find(trace_id: str) -> TraceFile | None:
    """The listed trace with this id; None for anything else."""
    if trace_id.startswith(FILE_PREFIX):
        listing = server_traces()
    elif trace_id.startswith(UPLOAD_PREFIX):
        listing = uploaded_traces()
    else:
        return None
    return next((t for t in listing if t.id == trace_id), None)


def save_upload(upload: UploadedFile) -> TraceFile:
    """Store an uploaded trace under its content hash once it proved readable.

    What is kept is a scrubbed copy (``scrub_trace``): an operator's recording may carry
    container env values or tokens, and nothing Handoff stores may."""
    limit = settings.HANDOFF_REPLAY_MAX_UPLOAD_BYTES
    if upload.size is not None and upload.size > limit:
        raise TraceTooLarge(f"The trace is larger than the {limit_text(limit)} limit.")
    folder = Path(settings.HANDOFF_REPLAY_UPLOAD_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".upload-")
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in upload.chunks():
                digest.update(chunk)
                out.write(chunk)
        scrubbed = temp + ".scrubbed"
        try:
            scrub_trace(temp, scrubbed)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceRejected(f"the file could not be read: {exc}") from exc
        state = read_state(scrubbed)
        trace_id = UPLOAD_PREFIX + digest.hexdigest()[:24]
        name = trace_id.removeprefix(UPLOAD_PREFIX) + UPLOAD_SUFFIX
        final = folder / name
        os.replace(scrubbed, final)
    finally:
        for leftover in (temp, temp + ".scrubbed"):
            if os.path.exists(leftover):
                os.unlink(leftover)
    trace = TraceFile(trace_id, name, final, final.stat().st_size, True)
    _remember(trace, state)
    return trace


def read_state(path: str | Path) -> ReplayState:
    """A trace folded for replay, or ``TraceRejected`` with the one-line reason: uploads
    and the server's own trace files get the same message and status, never a 500."""
    try:
        return ReplayState.from_file(path, stuck_after=float(settings.HANDOFF_STUCK_AFTER))
    except EmptyTrace as exc:
        raise TraceRejected(f"not a Handoff trace: {exc}") from exc
    except (OSError, EOFError, zlib.error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise TraceRejected(f"the file could not be read: {reason}") from exc


def scrub_trace(source: str | Path, target: str | Path) -> None:
    """Keep an upload as gzipped trace v1, every object scrubbed of secrets.

    A trace is copied line for line: a line that is not a JSON object becomes a marker that
    is not JSON either, so the reader still reports it at the same line number. Any other
    input the importers read (kubectl output, an audit log) is kept as the trace v1 lines
    they make of it, which they scrub."""
    reader = open_events(source)
    events = iter(reader)
    first = next(events, None)
    if reader.format in ("trace", "empty", None):
        with open_binary(source) as lines, gzip.open(target, "wb") as out:
            for raw in lines:
                out.write(_scrub_line(raw))
        return
    with gzip.open(target, "wb") as out:
        writer = TraceWriter(out, source=f"upload ({reader.format})")
        for event in itertools.chain([first], events):
            if event is not None and event.raw:
                writer.write_line(event.raw)
        writer.close()


def _scrub_line(raw: bytes) -> bytes:
    if not raw.strip():
        return b"\n"
    try:
        record = orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError):
        return b"<a line that was not JSON, dropped at upload>\n"
    if not isinstance(record, dict):
        return b"<a line that was not a JSON object, dropped at upload>\n"
    if isinstance(record.get("object"), dict):
        scrub(record["object"])
    return orjson.dumps(record) + b"\n"


def upload_allowed(user_id: int) -> bool:
    """At most HANDOFF_REPLAY_UPLOADS_PER_HOUR uploads per user per clock hour (counted
    in Redis, so every web process shares the count)."""
    key = f"handoff:uploads:{user_id}:{int(time.time() // 3600)}"
    pipe = clusterdata.client().pipeline(transaction=False)
    pipe.incr(key)
    pipe.expire(key, 3600)
    count, _ = pipe.execute()
    return int(count) <= settings.HANDOFF_REPLAY_UPLOADS_PER_HOUR


# Folded traces kept in this process, least recently used dropped first.
_loaded: OrderedDict[tuple[str, float], ReplayState] = OrderedDict()
_loaded_lock = threading.Lock()
_loading: dict[tuple[str, float], threading.Lock] = {}


def _key(trace: TraceFile) -> tuple[str, float]:
    return (str(trace.path), trace.path.stat().st_mtime)


def _remember(trace: TraceFile, state: ReplayState) -> None:
    with _loaded_lock:
        _loaded[_key(trace)] = state
        while len(_loaded) > settings.HANDOFF_REPLAY_CACHE:
            _loaded.popitem(last=False)


def load(trace: TraceFile) -> ReplayState:
    """The trace folded (with its checkpoints); folded once per process while cached."""
    key = _key(trace)
    with _loaded_lock:
        state = _loaded.get(key)
        if state is not None:
            _loaded.move_to_end(key)
            return state
        gate = _loading.setdefault(key, threading.Lock())
    with gate:  # two requests for one new trace fold it once
        with _loaded_lock:
            state = _loaded.get(key)
        if state is None:
            state = read_state(trace.path)
            replayed.known(state)  # what the fleet page takes from every frozen pod
            _remember(trace, state)
    return state
