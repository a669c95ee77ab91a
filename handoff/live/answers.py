"""Answers every viewer of a live cluster shares (the web's fleet and nodes pages): built
at most once per SHARED_TTL for all the web processes together, kept encoded in Redis
beside the store (a cache with its own keys, never the store's data).

Fifty people opening the fleet page in the same second need its 10,000-pod swimlane
once, not fifty times, and with several Daphne processes (``manage.py serve``) not once
per process either: the process that builds an answer leaves its bytes in Redis for
SHARED_TTL; the others, and the builder's later requests, send those bytes. While one
process builds, the others wait for it (a builder that dies frees the others after
BUILD_WAIT). An answer is at most SHARED_TTL older than the fold's last flush.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import redis

from handoff.live import store

SHARED_TTL = 1.0  # seconds an answer is reused
BUILD_WAIT = 5.0  # seconds the other processes wait for a builder before building
POLL = 0.01  # seconds between their looks
_memo: dict[tuple[str, str], tuple[float, bytes]] = {}  # key -> (good until, body)
_memo_lock = threading.Lock()


def answer_key(cluster: str, kind: str) -> str:
    return store.k(cluster, "shared", kind)


def shared(client: redis.Redis, cluster: str, kind: str, make: Callable[[], bytes]) -> bytes:
    """``make()``'s bytes as whichever process built them last within SHARED_TTL; built
    here when none did."""
    key = answer_key(cluster, kind)
    memo_key = (repr(client.connection_pool), key)
    now = time.monotonic()
    with _memo_lock:
        hit = _memo.get(memo_key)
    if hit is not None and now < hit[0]:
        return hit[1]
    return _fetch(client, key, memo_key) or _build(client, key, memo_key, make)


def _fetch(client: redis.Redis, key: str, memo_key: tuple[str, str]) -> bytes | None:
    pipe = client.pipeline(transaction=False)
    pipe.get(key)
    pipe.pttl(key)
    body, ttl_ms = pipe.execute()
    if body is None or ttl_ms is None or ttl_ms <= 0:
        return None
    with _memo_lock:
        _memo[memo_key] = (time.monotonic() + ttl_ms / 1000, body)
    return body


def _build(
    client: redis.Redis, key: str, memo_key: tuple[str, str], make: Callable[[], bytes]
) -> bytes:
    lock = key + ":building"
    if not client.set(lock, b"1", nx=True, px=int(BUILD_WAIT * 1000)):
        deadline = time.monotonic() + BUILD_WAIT
        while time.monotonic() < deadline:
            time.sleep(POLL)
            body = _fetch(client, key, memo_key)
            if body is not None:
                return body
    try:
        body = make()
        client.set(key, body, px=int(SHARED_TTL * 1000))
        with _memo_lock:
            _memo[memo_key] = (time.monotonic() + SHARED_TTL, body)
        return body
    finally:
        client.delete(lock)
