"""What /healthz reports: Redis reachability, the Celery worker heartbeat, and each
watch stream: lag, holder, errors, and whether it is failing.

Reports carry numbers, error class names and causes in words ("connection refused"),
never messages that could carry credentials. Each watch stream's API server
(``endpoint``, host:port) is named by ``failing_lines`` for `status`, the home page and
the board; /healthz is unauthenticated and leaves it out (``report(addresses=False)``).

One judgement for every reader: ``check_streams`` says per stream whether it is failing
and why, ``cluster_state`` turns that into one word per cluster and ``failing_lines`` into
one line per failing stream. /healthz, `status`, the cluster list and the board all call
these, so they cannot disagree.
"""

import time
from dataclasses import dataclass

import redis

from handoff.live import clusters, hosts, store

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


@dataclass(frozen=True)
class StreamLimits:
    """When a stream counts as failing (Django settings HANDOFF_STREAM_*_LIMIT, read by
    ``handoff.conf.stream_limits``: the caller hands them in)."""

    errors: int = 3  # failed API calls in a row
    unheld_s: float = 30.0  # no live lease for this long (and no successor)
    silence_s: float = 300.0  # a held watch heard nothing from the API server
    fold_lag_s: float = 30.0  # oldest entry the fold has not folded yet


WATCHES = frozenset(clusters.WATCH_RESOURCES)


def check_streams(
    client: redis.Redis,
    now: float,
    limits: StreamLimits,
    only: str | None = None,
    standing: hosts.Standing | None = None,
) -> dict:
    """Per cluster (``only`` one of them), per stream: lag (now - last event), lease holder,
    last error, events/s, and ``ok`` with the ``problem`` when the stream is failing.

    The holder is reported as held or not only: its value names a host. Error texts are
    class names and HTTP statuses (see handoff/sources), never messages from the server.
    A stream nobody holds while no live stream host has room says so at once: the pool
    is full (``hosts.Pool.problem``), which is never a silent wait. Three round trips
    however many clusters and streams: ``hosts.standing`` (unless handed in), and the
    oldest unfolded entry of each fold stream.
    """
    standing = standing or hosts.standing(client, now)
    full = standing.pool().problem()
    names = [name for name in standing.registered if only is None or name == only]
    behind = _fold_behind(client, {name: standing.cursors.get(name, "0-0") for name in names}, now)
    return {
        name: {
            stream: _stream_health(
                standing.states[name, stream],
                standing.holders[name, stream] is not None,
                stream,
                now,
                limits,
                behind[name] if stream == clusters.FOLD else None,
                full,
            )
            for stream in standing.registered[name].streams()
        }
        for name in names
    }


def _stream_health(
    state: dict[str, str],
    held: bool,
    stream: str,
    now: float,
    limits: StreamLimits,
    behind: float | None,
    full: str | None = None,
) -> dict:
    last = _float(state.get("last_event"))
    started = _float(state.get("started"))
    events = int(state.get("events") or 0)
    since = int(state.get("events_at_start") or 0)
    window = now - started if started is not None else None
    problem = _problem(state, held, stream, now, behind, limits, full)
    return {
        "ok": problem is None,
        "problem": problem,
        "held": held,
        "lag_s": None if last is None else round(max(0.0, now - last), 1),
        "silent_s": _age(state.get("seen"), now),
        "behind_s": behind,
        "events": events,
        "events_per_s": round((events - since) / window, 1) if window and window > 0 else None,
        "failures": int(state.get("failures") or 0),
        "last_error": state.get("last_error") or None,
        "error_age_s": _age(state.get("error_at"), now),
        "endpoint": state.get("endpoint") or None,
        "started": started is not None,
    }


def cluster_state(per: dict[str, dict]) -> str:
    """One word for a cluster's streams: ``failing`` when one is (the /healthz judgement),
    ``starting`` when one has never been held yet but is not failing (a new cluster), else
    ``ok``."""
    if any(not s["ok"] for s in per.values()):
        return "failing"
    if any(not s["held"] and not s.get("started") for s in per.values()):
        return "starting"
    return "ok"


def failing_lines(streams: dict[str, dict[str, dict]], addresses: bool = True) -> list[str]:
    """One line per failing stream: ``cluster/stream (host:port): why``. Without
    ``addresses`` (/healthz) the API server's host:port is left out."""
    lines = []
    for cluster, per in streams.items():
        for stream, s in per.items():
            if s["ok"]:
                continue
            where = f" ({s['endpoint']})" if addresses and s.get("endpoint") else ""
            lines.append(f"{cluster}/{stream}{where}: {s['problem']}")
    return lines


def _problem(
    state: dict[str, str],
    held: bool,
    stream: str,
    now: float,
    behind: float | None,
    limits: StreamLimits,
    full: str | None = None,
) -> str | None:
    """Why the stream is failing, in words (numbers and class names only), or None.
    ``full``: the watch pool's problem when it has no room for unheld streams."""
    failures = int(state.get("failures") or 0)
    if failures >= limits.errors:
        return f"{failures} failed calls in a row, last: {state.get('last_error') or '?'}"
    if not held:
        if state.get("finished"):
            return None  # a simulator run that ended: nothing to hold
        if full is not None:
            return full
        # Since when nobody holds it: the last renewal, start, or the cluster's registration.
        marks = [_float(state.get(f)) for f in ("renewed", "started", "registered")]
        since = max((m for m in marks if m is not None), default=None)
        if since is not None and now - since > limits.unheld_s:
            return f"no holder for {now - since:.0f}s (lease lapsed, no successor)"
        return None
    if stream in WATCHES:
        seen = _float(state.get("seen"))
        if seen is not None and now - seen > limits.silence_s:
            return f"nothing from the API server for {now - seen:.0f}s"
    if behind is not None and behind > limits.fold_lag_s:
        return f"fold {behind:.0f}s behind its stream"
    return None


def _fold_behind(client: redis.Redis, cursors: dict[str, str], now: float) -> dict[str, float]:
    """Per cluster, the age of the oldest stream entry its fold has not folded yet after
    its ``cursors`` (0 when caught up): one round trip."""
    pipe = client.pipeline(transaction=False)
    for name, cursor in cursors.items():
        store.first_unfolded(pipe, name, cursor)
    return {
        name: round(store.unfolded_age(first, now), 1)
        for name, first in zip(cursors, pipe.execute(), strict=True)
    }


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text else None
    except ValueError:
        return None


def _age(text: str | None, now: float) -> float | None:
    at = _float(text)
    return None if at is None else round(max(0.0, now - at), 1)


def report(
    client: redis.Redis,
    now: float,
    stale_after: float,
    limits: StreamLimits,
    addresses: bool = False,
) -> dict:
    """The whole answer of /healthz: unhealthy when Redis, the workers or a stream fail.
    Without ``addresses`` no stream carries its API server's host:port."""
    result = {"redis": check_redis(client)}
    result["celery"] = (
        check_celery(client, now, stale_after)
        if result["redis"]["ok"]
        else {
            "ok": False,
            "error": "redis unreachable",
        }
    )
    result["streams"] = {}
    if result["redis"]["ok"]:
        standing = hosts.standing(client, now)
        result["streams"] = check_streams(client, now, limits, standing=standing)
        result["pool"] = standing.pool().as_dict()
    failing = failing_lines(result["streams"], addresses)
    if not addresses:
        for per in result["streams"].values():
            for s in per.values():
                s.pop("endpoint")
    if failing:
        result["failing"] = failing
    healthy = result["redis"]["ok"] and result["celery"]["ok"] and not failing
    return {"status": "ok" if healthy else "unhealthy", **result}
