"""What /healthz reports: Redis reachability, the Celery worker heartbeat, stream lag.

Reports carry numbers and error class names only: /healthz is unauthenticated, so no
hostnames, URLs or messages that could carry credentials.
"""

import time

import redis

HEARTBEAT_KEY = "handoff:health:worker-heartbeat"


def write_heartbeat(client: redis.Redis, now: float) -> None:
    client.set(HEARTBEAT_KEY, repr(now))


def check_redis(client: redis.Redis) -> dict:
    started = time.perf_counter()
    try:
        client.ping()
    except redis.RedisError as exc:
        return {"ok": False, "error": type(exc).__name__}
    latency_ms = (time.perf_counter() - started) * 1000
    return {"ok": True, "latency_ms": round(latency_ms, 2)}


def check_celery(client: redis.Redis, now: float, stale_after: float) -> dict:
    try:
        raw = client.get(HEARTBEAT_KEY)
    except redis.RedisError as exc:
        return {"ok": False, "error": type(exc).__name__}
    if raw is None:
        return {"ok": False, "heartbeat_age_s": None, "stale_after_s": stale_after}
    age = max(0.0, now - float(raw))
    return {
        "ok": age <= stale_after,
        "heartbeat_age_s": round(age, 1),
        "stale_after_s": stale_after,
    }


def check_streams(client: redis.Redis, now: float) -> dict:
    # Filled by the ingestion (issue 5): per stream lag, lease holder, last error.
    return {}


def report(client: redis.Redis, now: float, stale_after: float) -> dict:
    result = {"redis": check_redis(client)}
    result["celery"] = (
        check_celery(client, now, stale_after)
        if result["redis"]["ok"]
        else {
            "ok": False,
            "error": "redis unreachable",
        }
    )
    result["streams"] = check_streams(client, now) if result["redis"]["ok"] else {}
    healthy = result["redis"]["ok"] and result["celery"]["ok"]
    return {"status": "ok" if healthy else "unhealthy", **result}
