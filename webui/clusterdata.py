"""What the cluster list, the board, the API and the websocket read about a cluster.

One Redis connection pool per process; every function takes the client so the consumer
can run them in a worker thread.
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import redis
from django.conf import settings

from handoff.core.trace import format_time, parse_time
from handoff.live import health, queries, store

DURATIONS_TTL = 10.0  # seconds a cluster's sampled duration percentiles are reused
_durations: dict[str, tuple[float, dict[str, Any]]] = {}


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)


def client() -> redis.Redis:
    return _client(settings.REDIS_URL)


def clock(fold: dict[str, str], now: float | None = None) -> dict[str, str | None]:
    """The fold's cursor and the cluster's clock now: the time the fold judged at its last
    flush, moved on by the wall time since (what the fold worker's own clock does)."""
    now = time.time() if now is None else now
    at, flushed = fold.get("evaluated_at"), fold.get("flushed")
    evaluated = now
    if at and flushed:
        try:
            evaluated = parse_time(at) + max(0.0, now - float(flushed))
        except ValueError:
            evaluated = now
    return {"stream_cursor": fold.get("cursor") or "0-0", "evaluated_at": format_time(evaluated)}


def streams(name: str, per: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per stream health, one word for the whole cluster and one line per failing stream:
    the judgement /healthz and `status` make (``handoff.live.health``)."""
    lags = [s["lag_s"] for s in per.values() if s["lag_s"] is not None]
    return {
        "state": health.cluster_state(per),
        "failing": health.failing_lines({name: per}),
        "lag_s": max(lags) if lags else None,
        "streams": per,
    }


def cluster_rows(c: redis.Redis) -> list[dict[str, Any]]:
    """The cluster list: every registered cluster with its counts and stream health."""
    every = health.check_streams(c, time.time())
    rows = []
    for name, config in store.clusters(c).items():
        counts = queries.counts(c, name)
        health_ = streams(name, every.get(name, {}))
        rows.append(
            {
                "name": name,
                "kind": config.kind,
                "pods": counts["pods"],
                "attention": counts["attention"],
                "verdicts": counts["verdicts"],
                "health": health_["state"],
                "failing": health_["failing"],
                "lag_s": health_["lag_s"],
                "board": f"/clusters/{name}/",
            }
        )
    return rows


def summary(c: redis.Redis, config: store.ClusterConfig, durations: bool = True) -> dict:
    """Counts per verdict, duration percentiles, stream health, cursor and clock."""
    fold = store.fold_state(c, config.name)
    body: dict[str, Any] = {"cluster": config.name, "kind": config.kind, **clock(fold)}
    counts = queries.counts(c, config.name)
    counts["nodes"] = int(fold.get("nodes") or 0)
    if durations:
        counts.update(_cached_durations(c, config.name))
    body["summary"] = counts
    per = health.check_streams(c, time.time()).get(config.name, {})
    body["streams"] = streams(config.name, per)
    return body


def _cached_durations(c: redis.Redis, cluster: str) -> dict[str, Any]:
    now = time.monotonic()
    hit = _durations.get(cluster)
    if hit is None or now - hit[0] > DURATIONS_TTL:
        found = queries.durations(c, cluster)
        hit = (now, {"durations": found["durations"], "sampled": found["sampled"]})
        _durations[cluster] = hit
    return hit[1]
