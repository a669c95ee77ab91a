"""What the cluster list, the board, the API and the websocket read about a cluster.

One Redis connection pool per process; every function takes the client so the consumer
can run them in a worker thread.
"""

from __future__ import annotations

import time
from typing import Any

import redis

from handoff import conf
from handoff.live import health, hosts, queries
from handoff.live.queries import ClusterConfig

DURATIONS_TTL = 10.0  # seconds a cluster's sampled duration percentiles are reused
_durations: dict[str, tuple[float, dict[str, Any]]] = {}


def client() -> redis.Redis:
    """This process's client for web requests (5 s per command)."""
    return conf.redis_client(timeout=5, shared=True)


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
    """The cluster list: every registered cluster with its counts and stream health, in
    four round trips however many clusters there are."""
    now = time.time()
    standing = hosts.standing(c, now)
    every = health.check_streams(c, now, conf.stream_limits(), standing=standing)
    counted = queries.counts_of(c, list(standing.registered))
    rows = []
    for name, config in standing.registered.items():
        counts = counted[name]
        health_ = streams(name, every.get(name, {}))
        rows.append(
            {
                "name": name,
                "kind": config.kind,
                "described": describe(config),
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


SUMMARY_FIELDS = (*queries.CLOCK, "nodes")  # of the fold's progress, read by ``summary``


def summary(
    c: redis.Redis, config: ClusterConfig, durations: bool = True, fold: dict | None = None
) -> dict:
    """Counts per verdict, duration percentiles, stream health, cursor and clock.
    ``fold``: the fold's progress (``SUMMARY_FIELDS`` at least), when already read."""
    if fold is None:
        fold = queries.progress(c, config.name, *SUMMARY_FIELDS)
    body: dict[str, Any] = {"cluster": config.name, "kind": config.kind, **queries.clock(fold)}
    counts = queries.counts(c, config.name)
    counts["nodes"] = int(fold.get("nodes") or 0)
    if durations:
        counts.update(_cached_durations(c, config.name))
    body["summary"] = counts
    per = health.check_streams(c, time.time(), conf.stream_limits(), only=config.name)
    per = per.get(config.name, {})
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


# The simulator's API server names itself so in /version (handoff/sim/serve/discovery.py).
SIMULATOR_VERSION_SUFFIX = "-handoff-sim"


def simulated(config: ClusterConfig) -> bool:
    """Whether the cluster is the built-in simulator: in a worker, or served over HTTP
    (as `make demo` serves it; `clusters add` noted the API's /version)."""
    version = str((config.options or {}).get("version", ""))
    return config.kind == "simulator" or version.endswith(SIMULATOR_VERSION_SUFFIX)


def describe(config: ClusterConfig) -> str:
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
