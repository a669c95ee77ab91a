"""Answers every viewer of a live cluster shares (the web's fleet and nodes pages): built
once for every web process, kept encoded in Redis beside the store (a cache with its own
keys, never the store's data), and rebuilt only when the store has changed.

Fifty people opening the fleet page in the same second need its 10,000-pod swimlane
once, not fifty times, and with several Daphne processes (``manage.py serve``) not once
per process either. Each answer carries the store's version it was built from (the fold's
``flushed`` stamp, rewritten by every flush, and its ``stored`` count, which retention's
drops between flushes change) and when it was last known current.

Who builds: the answer builder (``pages.builder``, a process ``serve`` starts beside the
Daphne processes) rebuilds the answers someone asked for in the last WANTED seconds once
the store has moved on, at most once per SHARED_TTL each, so the web processes only
read bytes: a build is 50-250 ms of Python that, in a thread of a web process, held that
process's GIL from every request it served. With no builder alive (``runserver``, a
single Daphne, tests), a web process builds: the first answer while its viewer waits,
the next in a thread of its own while the last is sent, as before the builder.

What a viewer gets: the store as of its last flush when nothing changed since (however
old the answer), else at most SHARED_TTL plus one build behind the fold (plus the
builder's POLL), and never an answer the store moved past more than KEEP ago.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from handoff.live import store

log = logging.getLogger(__name__)

SHARED_TTL = 1.0  # seconds between a process's looks at an answer, and between its builds
KEEP = 30.0  # seconds an answer the store moved past may still be sent while rebuilt
BUILD_WAIT = 5.0  # seconds the others wait for a first builder before building
POLL = 0.01  # seconds between their looks
ANSWER_TTL = 120.0  # seconds an answer nobody looks at stays in Redis
WANTED = 60.0  # seconds after its last viewer the builder stops rebuilding an answer
# Seconds the builder's heartbeat lasts (renewed every builder.POLL and after each build):
# a build may take seconds on a loaded machine.
BUILDER_TTL = 10.0
# When the answer was last known current (Unix time) and the store's version it was built
# from (VERSION: the fold's ``flushed`` and ``stored``; 0 for what no fold wrote), before
# its bytes.
_HEADER = struct.Struct("<ddd")
VERSION = ("flushed", "stored")
Version = tuple[float, float]
WANTED_KEY = "handoff:answers:wanted"  # "<cluster>\n<kind>" -> when a web last looked
BUILDER_KEY = "handoff:answers:builder"  # present while an answer builder runs


@dataclass(frozen=True)
class Held:
    """An answer as a process holds it."""

    looked_at: float  # time.monotonic() of the process's last look in Redis
    current_at: float
    version: Version
    body: bytes


_memo: dict[tuple[str, str], Held] = {}
_memo_lock = threading.Lock()


def answer_key(cluster: str, kind: str) -> str:
    """Where ``kind``'s answer is kept. "gz": the web keeps them gzip-packed
    (``pages.stored.packed``); processes of an earlier version kept plain JSON under
    ``answer:<kind>`` and so never read these, nor these processes theirs."""
    return store.k(cluster, "answer", "gz", kind)


def wanted_field(cluster: str, kind: str) -> str:
    return f"{cluster}{store.NAME_SEPARATOR}{kind}"


def store_version(raw: list[bytes | None]) -> Version:
    """The store's version from the fold's VERSION fields (HMGET), 0 for one missing."""
    flushed, stored = (float(value) if value else 0.0 for value in raw)
    return flushed, stored


def read_header(raw: bytes | None) -> tuple[float, Version] | None:
    """(current at, version) of a stored answer, or None when there is none."""
    if raw is None or len(raw) < _HEADER.size:
        return None
    current_at, flushed, stored = _HEADER.unpack_from(raw)
    return current_at, (flushed, stored)


def header(current_at: float, version: Version) -> bytes:
    return _HEADER.pack(current_at, *version)


def shared(client: redis.Redis, cluster: str, kind: str, make: Callable[[], bytes]) -> bytes:
    """The answer ``kind`` of ``cluster`` as whichever process built it last, looked at in
    Redis at most once per SHARED_TTL by this process; built by ``make()`` when there is
    none, or (no builder alive) when the store moved on."""
    key = answer_key(cluster, kind)
    memo_key = (repr(client.connection_pool), key)
    with _memo_lock:
        held = _memo.get(memo_key)
    if held is not None and time.monotonic() - held.looked_at < SHARED_TTL:
        return held.body
    pipe = client.pipeline(transaction=False)
    pipe.getrange(key, 0, _HEADER.size - 1)
    pipe.hmget(store.fold_key(cluster), VERSION)
    pipe.exists(BUILDER_KEY)
    pipe.hset(WANTED_KEY, wanted_field(cluster, kind), repr(time.time()))
    pipe.pexpire(key, int(ANSWER_TTL * 1000))
    raw_header, raw_version, builder, *_ = pipe.execute()
    found = read_header(raw_header)
    version = store_version(raw_version)
    if found is None:
        return _first(client, cluster, key, memo_key, make)
    current_at, built_from = found
    if held is not None and held.version == built_from:  # the same store, the same bytes
        body = held.body
    else:
        body = _body(client, key)
        if body is None:  # gone between the two reads
            return _first(client, cluster, key, memo_key, make)
    if built_from == version:
        current_at = restamp(client, key, current_at, version)
    _remember(memo_key, Held(time.monotonic(), current_at, built_from, body))
    if built_from == version:
        return body
    if time.time() - current_at >= KEEP:
        return _first(client, cluster, key, memo_key, make)
    if not builder:
        _renew(client, cluster, key, memo_key, make)
    return body


def _remember(memo_key: tuple[str, str], held: Held) -> None:
    with _memo_lock:
        _memo[memo_key] = held


def restamp(client: redis.Redis, key: str, current_at: float, version: Version) -> float:
    """Note that the answer is still current, when that was last noted KEEP / 2 ago, so an
    answer to a store that rests stays young enough to be sent once the store moves on
    (the header only, written in place); when it is now known current."""
    now = time.time()
    if now - current_at < KEEP / 2:
        return current_at
    client.setrange(key, 0, header(now, version))
    return now


def _body(client: redis.Redis, key: str) -> bytes | None:
    raw = client.get(key)
    if read_header(raw) is None:
        return None
    return raw[_HEADER.size :]  # type: ignore[index]


def claim(client: redis.Redis, key: str) -> bool:
    """The right to build ``key``'s next answer, for BUILD_WAIT at most."""
    return bool(client.set(key + ":building", b"1", nx=True, px=int(BUILD_WAIT * 1000)))


def build(
    client: redis.Redis, cluster: str, key: str, make: Callable[[], bytes]
) -> tuple[float, Version, bytes]:
    """Build under a claim, store, and hold the claim on for the rest of SHARED_TTL (so an
    answer is built at most once per SHARED_TTL whoever asks); (current at, version, body).
    The version is read before building: a flush meanwhile makes it stale at once."""
    started = time.monotonic()
    try:
        version = store_version(client.hmget(store.fold_key(cluster), VERSION))
        built_at = time.time()
        body = make()
        client.set(key, header(built_at, version) + body, px=int(ANSWER_TTL * 1000))
        return built_at, version, body
    finally:
        left = SHARED_TTL - (time.monotonic() - started)
        if left > 0.001:
            client.pexpire(key + ":building", int(left * 1000))
        else:
            client.delete(key + ":building")


def _store(
    client: redis.Redis,
    cluster: str,
    key: str,
    memo_key: tuple[str, str],
    make: Callable[[], bytes],
) -> bytes:
    built_at, version, body = build(client, cluster, key, make)
    _remember(memo_key, Held(time.monotonic(), built_at, version, body))
    return body


def _renew(
    client: redis.Redis,
    cluster: str,
    key: str,
    memo_key: tuple[str, str],
    make: Callable[[], bytes],
) -> None:
    """Build the next answer in a thread, unless another process or thread already is
    (or built one less than SHARED_TTL ago)."""
    if claim(client, key):
        threading.Thread(
            target=_store_in_background,
            args=(client, cluster, key, memo_key, make),
            name="shared-answer",
            daemon=True,
        ).start()


def _store_in_background(
    client: redis.Redis,
    cluster: str,
    key: str,
    memo_key: tuple[str, str],
    make: Callable[[], bytes],
) -> None:
    """``_store`` in the renewing thread: no request waits on it, so a failure is a log
    line (the last answer is sent until KEEP; the claim expires after BUILD_WAIT) instead
    of a traceback on the thread."""
    try:
        _store(client, cluster, key, memo_key, make)
    except redis.RedisError as exc:
        log.warning("shared answer %s not renewed: Redis: %s", key, exc)
    except Exception:
        log.exception("shared answer %s not renewed", key)


def _first(
    client: redis.Redis,
    cluster: str,
    key: str,
    memo_key: tuple[str, str],
    make: Callable[[], bytes],
) -> bytes:
    """No answer to send: build one, or wait for the process building it."""
    deadline = time.monotonic() + BUILD_WAIT
    while not claim(client, key) and time.monotonic() < deadline:
        time.sleep(POLL)
        raw = client.get(key)
        found = read_header(raw)
        if found is not None and time.time() - found[0] < KEEP:
            body = raw[_HEADER.size :]  # type: ignore[index]
            _remember(memo_key, Held(time.monotonic(), found[0], found[1], body))
            return body
    return _store(client, cluster, key, memo_key, make)
