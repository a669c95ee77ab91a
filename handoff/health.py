"""What /healthz reports: Redis reachability, the Celery worker heartbeat, stream lag.

Reports carry numbers and error class names only: /healthz is unauthenticated, so no
hostnames, URLs or messages that could carry credentials.
"""

import time

import redis

from handoff import store

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
    """Per cluster, per stream: lag (now - last event), lease holder, last error, events/s.

    The holder is reported as held or not only: its value names a host. Error texts are
    class names and HTTP statuses (see handoff/sources), never messages from the server.
    """
    report: dict[str, dict] = {}
    for name, config in store.clusters(client).items():
        report[name] = {
            stream: _stream_health(client, name, stream, now) for stream in config.streams()
        }
    return report


def _stream_health(client: redis.Redis, cluster: str, stream: str, now: float) -> dict:
    state = store.stream_state(client, cluster, stream)
    holder = store.holder(client, cluster, stream)
    last = _float(state.get("last_event"))
    started = _float(state.get("started"))
    events = int(state.get("events") or 0)
    since = int(state.get("events_at_start") or 0)
    window = now - started if started is not None else None
    return {
        "ok": holder is not None,
        "held": holder is not None,
        "lag_s": None if last is None else round(max(0.0, now - last), 1),
        "events": events,
        "events_per_s": round((events - since) / window, 1) if window and window > 0 else None,
        "last_error": state.get("last_error") or None,
        "error_age_s": _age(state.get("error_at"), now),
    }


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _age(text: str | None, now: float) -> float | None:
    at = _float(text)
    return None if at is None else round(max(0.0, now - at), 1)


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
