"""Leases: at most one live holder per (cluster, stream), whatever the number of workers.

A holder takes the lease with SET NX PX and renews it by compare-and-set every ttl/3 from a
thread (``Lease.keep``); a crashed holder's lease lapses after ttl, and ``supervise``
starts a successor. Each renewal of a stream's lease is noted in the stream's hash
(``renewed``), so /healthz can tell how long a stream has had no holder.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable

import redis

from handoff.live import store

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def holder_id(task_id: str | None = None) -> str:
    """Who holds a lease: host, process and (when known) the Celery task."""
    base = f"{socket.gethostname()}:{os.getpid()}"
    return f"{base}:{task_id}" if task_id else base


class Lease:
    """SET NX PX, renewed by compare-and-set. ``renewed`` is called after each renewal."""

    def __init__(
        self,
        client: redis.Redis,
        key: str,
        holder: str,
        ttl: float,
        *,
        renewed: Callable[[], object] | None = None,
        name: str | None = None,
    ) -> None:
        self.client = client
        self.key = key
        self.holder = holder
        self.ttl_ms = int(ttl * 1000)
        self.renewed = renewed
        self.name = name or key

    @classmethod
    def of_stream(
        cls, client: redis.Redis, cluster: str, stream: str, holder: str, ttl: float
    ) -> Lease:
        """The lease of one stream of a cluster, noting each renewal in the stream's hash."""

        def renewed() -> None:
            store.note_stream(client, cluster, stream, renewed=time.time())

        key = store.lease_key(cluster, stream)
        return cls(client, key, holder, ttl, renewed=renewed, name=f"{cluster}/{stream}")

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.holder, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """False when the lease lapsed and someone else (or no one) holds it."""
        return bool(self.client.eval(_RENEW, 1, self.key, self.holder, self.ttl_ms))

    def release(self) -> None:
        self.client.eval(_RELEASE, 1, self.key, self.holder)

    def keep(
        self, stop: threading.Event, on_lost: Callable[[], object] = lambda: None
    ) -> threading.Thread:
        """Renew every ttl/3 from a thread until ``stop``; on loss set ``stop``, call on_lost."""

        def renew() -> None:
            while not stop.wait(self.ttl_ms / 3000):
                try:
                    held = self.renew()
                    if held and self.renewed is not None:
                        self.renewed()
                except redis.RedisError:
                    continue  # keep trying until the lease would lapse anyway
                if not held:
                    stop.set()
                    on_lost()

        thread = threading.Thread(target=renew, daemon=True, name=f"lease {self.name}")
        thread.start()
        return thread


def holder(client: redis.Redis, cluster: str, stream: str) -> str | None:
    raw = client.get(store.lease_key(cluster, stream))
    return None if raw is None else raw.decode()
