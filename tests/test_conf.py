"""handoff/conf.py: the one place Django settings become the live pipeline's knobs and
Redis clients, which the callers hand down to handoff/live."""

from __future__ import annotations

import time

from django.test import override_settings

from handoff import conf


@override_settings(
    HANDOFF_WATCH_WINDOW=120,
    HANDOFF_WATCH_SERVER_TIMEOUT=60,
    HANDOFF_WATCH_READ_TIMEOUT=45,
    HANDOFF_LEASE_TTL=9,
    HANDOFF_STUCK_AFTER=30,
    HANDOFF_PUSH_INTERVAL_MS=200,
    HANDOFF_SNAPSHOT_INTERVAL=15,
    HANDOFF_SNAPSHOT_EVENTS=5000,
    HANDOFF_RETENTION_HOURS=2,
    HANDOFF_STREAM_MAXLEN=1000,
    HANDOFF_STREAM_ERROR_LIMIT=7,
    HANDOFF_STREAM_UNHELD_LIMIT=11,
    HANDOFF_STREAM_SILENCE_LIMIT=13,
    HANDOFF_FOLD_LAG_LIMIT=17,
)
def test_the_knobs_are_the_settings():
    watch = conf.watch_settings()
    assert (watch.window, watch.server_timeout, watch.read_timeout, watch.lease_ttl) == (
        120,
        60,
        45,
        9,
    )
    fold = conf.fold_settings()
    assert (fold.stuck_after, fold.push_interval, fold.snapshot_interval) == (30.0, 0.2, 15.0)
    assert fold.snapshot_events == 5000
    assert (fold.retention_hours, fold.max_events, fold.gc_settle_interval) == (2.0, 1000, 1.0)
    limits = conf.stream_limits()
    assert (limits.errors, limits.unheld_s, limits.silence_s, limits.fold_lag_s) == (7, 11, 13, 17)
    assert conf.lease_ttl() == 9
    assert isinstance(conf.lease_ttl(), int)  # key expiries take whole seconds
    assert conf.stream_maxlen() == 1000


def test_one_shared_client_per_timeout_and_fresh_ones_otherwise(redis_url):
    web = conf.redis_client(timeout=5, shared=True)
    assert web is conf.redis_client(timeout=5, shared=True)
    assert web is not conf.redis_client(timeout=10, shared=True)
    assert conf.redis_client() is not conf.redis_client()
    assert web.ping()
    kwargs = web.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == (5, 2)
    quick = conf.redis_client(timeout=1).connection_pool.connection_kwargs
    assert (quick["socket_timeout"], quick["socket_connect_timeout"]) == (1, 1)
    worker = conf.redis_client().connection_pool.connection_kwargs
    assert worker.get("socket_timeout") is None  # workers block on streams


def test_a_client_without_a_timeout_waits_as_long_as_a_blocking_read_asks(redis_client):
    # redis-py 8 reads with a 5 s timeout unless told otherwise: a worker's XREAD BLOCK of
    # longer than that (record's, the fold's) must not be cut short by the client.
    client = conf.redis_client()
    key = "conf-test:blocking"
    started = time.monotonic()
    assert client.xread({key: "$"}, block=6000) == []
    assert time.monotonic() - started >= 6
    timed = conf.redis_client(timeout=2)
    assert timed.connection_pool.connection_kwargs["socket_timeout"] == 2
