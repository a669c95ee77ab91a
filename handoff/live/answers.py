"""Answers every viewer of a live cluster shares (the web's fleet and nodes pages): built
at most once per SHARED_TTL for all the web processes together, kept encoded in Redis
beside the store (a cache with its own keys, never the store's data).

Fifty people opening the fleet page in the same second need its 10,000-pod swimlane
once, not fifty times, and with several Daphne processes (``manage.py serve``) not once
per process either: the process that builds an answer leaves its bytes in Redis; the
others, and the builder's later requests, send those bytes. An answer older than
SHARED_TTL is still sent while one process builds the next in a thread of its own, so no
viewer waits for a build but the first one (nothing built yet: the others wait for that
builder, or build themselves after BUILD_WAIT if it died). What a viewer gets is at most
SHARED_TTL plus one build behind the fold's last flush, and never older than KEEP.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable

import redis

from handoff.live import store

log = logging.getLogger(__name__)

SHARED_TTL = 1.0  # seconds an answer is fresh: sent without building the next
KEEP = 30.0  # seconds an answer may still be sent while the next is built
BUILD_WAIT = 5.0  # seconds the others wait for a first builder before building
POLL = 0.01  # seconds between their looks
_HEADER = struct.Struct("<d")  # when the answer was built (Unix time), before its bytes
_memo: dict[tuple[str, str], tuple[float, bytes]] = {}  # key -> (built at, body)
_memo_lock = threading.Lock()


def answer_key(cluster: str, kind: str) -> str:
    return store.k(cluster, "shared", kind)


def shared(client: redis.Redis, cluster: str, kind: str, make: Callable[[], bytes]) -> bytes:
    """``make()``'s bytes as whichever process built them last; built here when none did
    or when the last are older than SHARED_TTL (then in a thread, the last sent now)."""
    key = answer_key(cluster, kind)
    memo_key = (repr(client.connection_pool), key)
    with _memo_lock:
        hit = _memo.get(memo_key)
    if hit is None or time.time() - hit[0] >= SHARED_TTL:
        hit = _fetch(client, key, memo_key)  # gone from Redis: the store was cleared
    if hit is None:
        return _first(client, key, memo_key, make)
    age = time.time() - hit[0]
    if age >= KEEP:
        return _first(client, key, memo_key, make)
    if age >= SHARED_TTL:
        _renew(client, key, memo_key, make)
    return hit[1]


def _fetch(client: redis.Redis, key: str, memo_key: tuple[str, str]) -> tuple[float, bytes] | None:
    raw = client.get(key)
    if raw is None or len(raw) < _HEADER.size:
        return None
    found = (_HEADER.unpack_from(raw)[0], raw[_HEADER.size :])
    with _memo_lock:
        _memo[memo_key] = found
    return found


def _claim(client: redis.Redis, key: str) -> bool:
    return bool(client.set(key + ":building", b"1", nx=True, px=int(BUILD_WAIT * 1000)))


def _store(
    client: redis.Redis, key: str, memo_key: tuple[str, str], make: Callable[[], bytes]
) -> bytes:
    """Build, keep (here and in Redis), release the claim."""
    try:
        built_at = time.time()
        body = make()
        client.set(key, _HEADER.pack(built_at) + body, px=int(KEEP * 1000))
        with _memo_lock:
            _memo[memo_key] = (built_at, body)
        return body
    finally:
        client.delete(key + ":building")


def _renew(
    client: redis.Redis, key: str, memo_key: tuple[str, str], make: Callable[[], bytes]
) -> None:
    """Build the next answer in a thread, unless another process or thread already is."""
    if _claim(client, key):
        threading.Thread(
            target=_store_in_background,
            args=(client, key, memo_key, make),
            name="shared-answer",
            daemon=True,
        ).start()


def _store_in_background(
    client: redis.Redis, key: str, memo_key: tuple[str, str], make: Callable[[], bytes]
) -> None:
    """``_store`` in the renewing thread: no request waits on it, so a failure is a log
    line (the last answer is sent until KEEP; the claim expires after BUILD_WAIT) instead
    of a traceback on the thread."""
    try:
        _store(client, key, memo_key, make)
    except redis.RedisError as exc:
        log.warning("shared answer %s not renewed: Redis: %s", key, exc)
    except Exception:
        log.exception("shared answer %s not renewed", key)


def _first(
    client: redis.Redis, key: str, memo_key: tuple[str, str], make: Callable[[], bytes]
) -> bytes:
    """No answer to send: build one, or wait for the process building it."""
    if not _claim(client, key):
        deadline = time.monotonic() + BUILD_WAIT
        while time.monotonic() < deadline:
            time.sleep(POLL)
            found = _fetch(client, key, memo_key)
            if found is not None and time.time() - found[0] < KEEP:
                return found[1]
        _claim(client, key)
    return _store(client, key, memo_key, make)
