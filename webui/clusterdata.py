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


def streams(per: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per stream health (as /healthz reports it) and one word for the whole cluster."""
    if not all(s["held"] for s in per.values()):
        state = "down"
    elif any(s["last_error"] and (s["error_age_s"] or 0) < 60 for s in per.values()):
        state = "errors"
    else:
        state = "ok"
    lags = [s["lag_s"] for s in per.values() if s["lag_s"] is not None]
    return {"state": state, "lag_s": max(lags) if lags else None, "streams": per}


def cluster_rows(c: redis.Redis) -> list[dict[str, Any]]:
    """The cluster list: every registered cluster with its counts and stream health."""
    every = health.check_streams(c, time.time())
    rows = []
    for name, config in store.clusters(c).items():
        counts = queries.counts(c, name)
        health_ = streams(every.get(name, {}))
        rows.append(
            {
                "name": name,
                "kind": config.kind,
                "described": describe(config),
                "pods": counts["pods"],
                "attention": counts["attention"],
                "verdicts": counts["verdicts"],
                "health": health_["state"],
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
    body["streams"] = streams(health.check_streams(c, time.time()).get(config.name, {}))
    return body


def _cached_durations(c: redis.Redis, cluster: str) -> dict[str, Any]:
    now = time.monotonic()
    hit = _durations.get(cluster)
    if hit is None or now - hit[0] > DURATIONS_TTL:
        found = queries.durations(c, cluster)
        hit = (now, {"durations": found["durations"], "sampled": found["sampled"]})
        _durations[cluster] = hit
    return hit[1]


# The simulator's API server names itself so in /version (handoff/sim/serve/discovery.py).
SIMULATOR_VERSION_SUFFIX = "-handoff-sim"


def simulated(config: store.ClusterConfig) -> bool:
    """Whether the cluster is the built-in simulator: in a worker, or served over HTTP
    (as `make demo` serves it; `clusters add` noted the API's /version)."""
    version = str((config.options or {}).get("version", ""))
    return config.kind == "simulator" or version.endswith(SIMULATOR_VERSION_SUFFIX)


def describe(config: store.ClusterConfig) -> str:
    """What a cluster is, in words, after its name: ``simulator · steady``,
    ``kubeconfig · context prod · https://…``, ``trace · incident.jsonl.gz``."""
    options = config.options or {}
    server = str(options.get("server", ""))
    if config.kind == "simulator":
        return f"simulator · {config.scenario}"
    if config.kind == "trace":
        return f"trace · {config.trace.rsplit('/', 1)[-1]}"
    if config.kind == "in-cluster":
        return " · ".join(x for x in ("in-cluster service account", server) if x)
    context = config.context or str(options.get("context", ""))
    if simulated(config):
        scenario = context.removeprefix("sim-") if context.startswith("sim-") else context
        return " · ".join(x for x in ("simulator", scenario, server) if x)
    parts = ["kubeconfig", f"context {context}" if context else "", server]
    return " · ".join(x for x in parts if x)
