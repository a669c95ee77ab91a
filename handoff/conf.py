"""Settings handed in: the one place the live pipeline's knobs are read from Django settings.

``handoff/live`` and ``handoff/core`` never import ``django.conf``; the tasks, commands and
web views build what they need here and pass it down (docs/configuration.md lists the
settings). ``redis_client`` is the one way a process gets a Redis client.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import redis
from django.conf import settings

from handoff.live.fold import FoldSettings
from handoff.live.health import StreamLimits
from handoff.live.sources.base import WatchSettings


def watch_settings() -> WatchSettings:
    return WatchSettings(
        window=settings.HANDOFF_WATCH_WINDOW,
        server_timeout=settings.HANDOFF_WATCH_SERVER_TIMEOUT,
        read_timeout=settings.HANDOFF_WATCH_READ_TIMEOUT,
        lease_ttl=settings.HANDOFF_LEASE_TTL,
        backoff_cap=float(settings.HANDOFF_WATCH_BACKOFF_CAP),
    )


def fold_settings() -> FoldSettings:
    return FoldSettings(
        stuck_after=float(settings.HANDOFF_STUCK_AFTER),
        push_interval=settings.HANDOFF_PUSH_INTERVAL_MS / 1000,
        snapshot_interval=float(settings.HANDOFF_SNAPSHOT_INTERVAL),
        snapshot_events=settings.HANDOFF_SNAPSHOT_EVENTS,
        retention_hours=float(settings.HANDOFF_RETENTION_HOURS),
        max_events=settings.HANDOFF_STREAM_MAXLEN,
        gc_settle_interval=1.0,
    )


def stream_limits() -> StreamLimits:
    """When a stream counts as failing, for /healthz, /metrics, the pages and ``status``."""
    return StreamLimits(
        errors=settings.HANDOFF_STREAM_ERROR_LIMIT,
        unheld_s=float(settings.HANDOFF_STREAM_UNHELD_LIMIT),
        silence_s=float(settings.HANDOFF_STREAM_SILENCE_LIMIT),
        fold_lag_s=float(settings.HANDOFF_FOLD_LAG_LIMIT),
    )


@dataclass(frozen=True)
class HostSettings:
    """A stream host's size and pace (HANDOFF_STREAMS_PER_WORKER, HANDOFF_HOST_INTERVAL)."""

    capacity: int
    interval: float


def host_settings() -> HostSettings:
    return HostSettings(
        capacity=int(settings.HANDOFF_STREAMS_PER_WORKER),
        interval=float(settings.HANDOFF_HOST_INTERVAL),
    )


def stream_maxlen() -> int:
    return settings.HANDOFF_STREAM_MAXLEN


def lease_ttl() -> int:
    """Seconds a crashed holder's lease outlives it (whole seconds: keys expire by them)."""
    return int(settings.HANDOFF_LEASE_TTL)


def redis_client(timeout: float | None = None, *, shared: bool = False) -> redis.Redis:
    """A client of ``settings.REDIS_URL``. ``timeout``: seconds a command may take (None:
    no limit, for workers that block on streams); connecting takes at most 2 s of it.
    ``shared``: one client (and connection pool) per process and timeout, for web requests."""
    if shared:
        return _shared(settings.REDIS_URL, timeout)
    return _make(settings.REDIS_URL, timeout)


@cache
def _shared(url: str, timeout: float | None) -> redis.Redis:
    return _make(url, timeout)


def _make(url: str, timeout: float | None) -> redis.Redis:
    if timeout is None:
        # Said outright: redis-py 8 reads with a 5 s timeout unless told otherwise.
        return redis.Redis.from_url(url, socket_timeout=None)
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=min(2, timeout))
