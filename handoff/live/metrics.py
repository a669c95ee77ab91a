"""``/metrics``: Prometheus text read from Redis, cheap with 150,000 pods stored.

Pods per verdict are the sizes of the verdict indexes (one ZCARD each). The duration
histograms and the incident counters are aggregated incrementally: every pod the fold
worker writes is logged with the fold's cursor in ``idx:changed`` (and removals in
``removed``), so each scrape reads only the views written since the previous one, replaces
their old contribution with the new one in ``handoff:{c}:metrics:counters`` and remembers
each pod's contribution in ``handoff:{c}:metrics:pods``. A removed pod's contribution is
forgotten, its counts are not: the counters only grow, so ``rate()`` over them is right
while the retention drops pods. The first scrape (and one after the change log lost
track: more removals than ``store.REMOVED_KEPT`` since) starts a rebuild that reads every
view, ``REBUILD_BUDGET`` per scrape; it counts the stored pods only, which Prometheus
sees as a counter reset. One scraper updates a cluster at a time (a lock); another one
meanwhile serves the counters as they are. Stream figures are /healthz's
(``health.check_streams``).
"""

from __future__ import annotations

import time

import redis

from handoff.core import verdicts as v
from handoff.core import viewcodec
from handoff.interop.exporters.prometheus import (
    Family,
    contribution,
    decode_contribution,
    delta,
    encode_contribution,
    histogram_families,
    incident_families,
    render,
    replaced,
)
from handoff.live import clusters, health, hosts, store

CHUNK = 2000
LOCK_TTL_MS = 60_000
REBUILD_BUDGET = 30_000  # views a scrape reads while rebuilding (about half a second)


def counters_key(cluster: str) -> str:
    return store.k(cluster, "metrics", "counters")


def contributions_key(cluster: str) -> str:
    return store.k(cluster, "metrics", "pods")


def mark_key(cluster: str) -> str:
    """Hash: ``changed`` and ``removed`` (cursor ms the aggregation has read up to)."""
    return store.k(cluster, "metrics", "mark")


def next_counters_key(cluster: str) -> str:
    """The counters a rebuild is summing, renamed over ``counters`` when it is done."""
    return store.k(cluster, "metrics", "counters-next")


def lock_key(cluster: str) -> str:
    return store.k(cluster, "metrics", "lock")


def refresh(client: redis.Redis, cluster: str) -> bool:
    """Bring the cluster's histogram counters up to date; False if another scraper is.

    A rebuild (the first scrape, or after losing track) reads at most ``REBUILD_BUDGET``
    views per scrape, so no scrape runs into Prometheus' timeout; until it is done the
    previous counters are served and ``handoff_metrics_histograms_complete`` is 0."""
    token = f"{time.time()}"
    if not client.set(lock_key(cluster), token, nx=True, px=LOCK_TTL_MS):
        return False
    try:
        mark = marks(client, cluster)
        if not mark or ("rebuild" not in mark and _lost_track(client, cluster, mark)):
            mark = _start_rebuild(client, cluster)
        if "rebuild" in mark:
            if not _rebuild_step(client, cluster, mark):
                return True
            mark = marks(client, cluster)
        _catch_up(client, cluster, mark)
    finally:
        client.delete(lock_key(cluster))
    return True


def marks(client: redis.Redis, cluster: str) -> dict[str, float]:
    """The aggregation's marks; ``rebuild`` (an HSCAN cursor) is there while rebuilding."""
    return {
        key.decode(): int(value) if key == b"rebuild" else float(value)
        for key, value in client.hgetall(mark_key(cluster)).items()
    }


def _lost_track(client: redis.Redis, cluster: str, mark: dict[str, float]) -> bool:
    oldest = client.zrange(store.removed_key(cluster), 0, 0, withscores=True)
    full = client.zcard(store.removed_key(cluster)) >= store.REMOVED_KEPT
    return bool(full and oldest and oldest[0][1] > mark.get("removed", 0.0))


def _start_rebuild(client: redis.Redis, cluster: str) -> dict[str, float]:
    """Marks taken before the first view is read: what changes during the rebuild is
    caught up afterwards (contributions make reading a pod twice harmless)."""
    mark: dict[str, float] = {"rebuild": 0}
    for name, key in (
        ("changed", store.changed_key(cluster)),
        ("removed", store.removed_key(cluster)),
    ):
        top = client.zrange(key, -1, -1, withscores=True)
        mark[name] = top[0][1] if top else 0.0
        mark[f"{name}_count"] = float(client.zcount(key, mark[name], mark[name]))
    pipe = client.pipeline(transaction=False)
    pipe.delete(contributions_key(cluster), next_counters_key(cluster), mark_key(cluster))
    pipe.hset(mark_key(cluster), mapping=mark)
    pipe.execute()
    return mark


def _rebuild_step(client: redis.Redis, cluster: str, mark: dict[str, float]) -> bool:
    """Read up to REBUILD_BUDGET views into the next counters; True once all are read."""
    cursor = int(mark["rebuild"])
    read = 0
    while True:
        cursor, chunk = client.hscan(store.pods_key(cluster), cursor, count=CHUNK)
        counters: dict[str, float] = {}
        per_pod: dict[bytes, str] = {}
        for uid, raw in chunk.items():
            counts = contribution(viewcodec.decode_view(raw))
            for key, value in counts.items():
                counters[key] = counters.get(key, 0.0) + value
            per_pod[uid] = encode_contribution(counts)
        pipe = client.pipeline(transaction=False)
        for key, value in counters.items():
            pipe.hincrbyfloat(next_counters_key(cluster), key, value)
        if per_pod:
            pipe.hset(contributions_key(cluster), mapping=per_pod)
        read += len(chunk)
        if cursor == 0:
            pipe.delete(counters_key(cluster))
            pipe.execute()
            if client.exists(next_counters_key(cluster)):
                client.rename(next_counters_key(cluster), counters_key(cluster))
            client.hdel(mark_key(cluster), "rebuild")
            return True
        pipe.hset(mark_key(cluster), "rebuild", cursor)
        pipe.execute()
        if read >= REBUILD_BUDGET:
            return False


def _catch_up(client: redis.Redis, cluster: str, mark: dict[str, float]) -> None:
    """Pods written or removed after the marks. Pods scored exactly at a mark were read
    last time; they are read again only if more pods now carry that score (pods written in
    a later flush within the same cursor millisecond)."""
    # The change index's members are "namespace/name\nuid"; the removal log's are uids.
    changed = _since(client, store.changed_key(cluster), mark, "changed")
    uids = [store.member_uid(member).encode() for member in changed]
    gone = _since(client, store.removed_key(cluster), mark, "removed")
    for start in range(0, max(len(uids), len(gone)), CHUNK):
        _apply(client, cluster, uids[start : start + CHUNK], gone[start : start + CHUNK])
    client.hset(mark_key(cluster), mapping=mark)


def _since(client: redis.Redis, key: str, mark: dict[str, float], name: str) -> list[bytes]:
    """Members scored after ``mark[name]``; moves the mark (and its count) in place."""
    at = mark.get(name, 0.0)
    counted = mark.get(f"{name}_count", -1.0)
    pipe = client.pipeline(transaction=False)
    pipe.zcount(key, at, at)
    pipe.zrangebyscore(key, f"({at!r}", "+inf", withscores=True)
    same, newer = pipe.execute()
    members = [uid for uid, _ in newer]
    if same > counted:  # fewer is normal: pods move on to newer scores
        members += client.zrangebyscore(key, at, at)
    if newer:
        top = newer[-1][1]
        mark[name] = top
        mark[f"{name}_count"] = float(client.zcount(key, top, top))
    else:
        mark[f"{name}_count"] = float(same)
    return members


def _apply(client: redis.Redis, cluster: str, uids: list[bytes], gone: list[bytes]) -> None:
    everyone = uids + gone
    if not everyone:
        return
    pipe = client.pipeline(transaction=False)
    pipe.hmget(contributions_key(cluster), everyone)
    pipe.hmget(store.pods_key(cluster), everyone)
    previous, views = pipe.execute()
    totals: dict[str, float] = {}
    kept: dict[bytes, str] = {}
    dropped: list[bytes] = []
    for uid, old_text, raw in zip(everyone, previous, views, strict=True):
        old = decode_contribution(old_text.decode()) if old_text else {}
        if not raw:  # forgotten by the retention: what it counted stays counted
            dropped.append(uid)
            continue
        new = replaced(old, contribution(viewcodec.decode_view(raw)))
        for key, value in delta(old, new).items():
            totals[key] = totals.get(key, 0.0) + value
        kept[uid] = encode_contribution(new)
    for key, value in totals.items():
        pipe.hincrbyfloat(counters_key(cluster), key, value)
    if kept:
        pipe.hset(contributions_key(cluster), mapping=kept)
    if dropped:
        pipe.hdel(contributions_key(cluster), *dropped)
    pipe.execute()


def counters(client: redis.Redis, cluster: str) -> dict[str, float]:
    return {
        key.decode(): round(float(value), 6)
        for key, value in client.hgetall(counters_key(cluster)).items()
    }


def metrics_text(client: redis.Redis, limits: health.StreamLimits, now: float | None = None) -> str:
    """The whole exposition: every registered cluster (``limits``: /healthz's)."""
    now = time.time() if now is None else now
    pods = Family("handoff_pods", "gauge", "Pods stored, by verdict.")
    lag = Family(
        "handoff_stream_lag_seconds", "gauge", "Seconds since a watch stream's last event."
    )
    behind = Family(
        "handoff_stream_behind_seconds",
        "gauge",
        "How far the fold worker is behind the newest event of the stream (ingestion lag).",
    )
    rate = Family(
        "handoff_stream_events_per_second",
        "gauge",
        "Events per second over the stream holder's current window.",
    )
    events = Family("handoff_stream_events_total", "counter", "Events a stream has delivered.")
    up = Family("handoff_stream_up", "gauge", "1 when a worker holds the stream's lease.")
    failing = Family(
        "handoff_stream_failing",
        "gauge",
        "1 when /healthz reports the stream failing (errors, no holder, silence, fold lag).",
    )
    complete = Family(
        "handoff_metrics_histograms_complete",
        "gauge",
        "0 while the duration histograms are being rebuilt (first scrapes), then 1.",
    )
    aggregated: list[Family] = []
    streams = health.check_streams(client, now, limits)
    for name in clusters.clusters(client):
        refresh(client, name)
        complete.add(0.0 if "rebuild" in marks(client, name) else 1.0, cluster=name)
        _verdict_counts(client, name, pods)
        counted = counters(client, name)
        namespaces, nodes = holding(client, name)
        aggregated += histogram_families(name, counted)
        aggregated += incident_families(name, counted, namespaces, nodes)
        for stream, state in sorted(streams.get(name, {}).items()):
            labels = {"cluster": name, "stream": stream}
            up.add(1.0 if state.get("held") else 0.0, **labels)
            failing.add(0.0 if state.get("ok", True) else 1.0, **labels)
            events.add(float(state.get("events") or 0), **labels)
            if state.get("lag_s") is not None:
                lag.add(state["lag_s"], **labels)
            if state.get("behind_s") is not None:
                behind.add(state["behind_s"], **labels)
            if state.get("events_per_s") is not None:
                rate.add(state["events_per_s"], **labels)
    pool = _pool_families(client, now)
    return render(
        [pods, complete, *_merge(aggregated), lag, behind, rate, events, up, failing, *pool]
    )


def _pool_families(client: redis.Redis, now: float) -> list[Family]:
    """The watch pool (``hosts.pool``): live stream hosts, and streams by capacity, held
    and unheld; unheld > 0 with held = capacity is a full pool."""
    pool = hosts.pool(client, now)
    workers = Family("handoff_watch_pool_workers", "gauge", "Live stream hosts.")
    workers.add(float(len(pool.capacities)))
    streams = Family(
        "handoff_watch_pool_streams",
        "gauge",
        "Streams the stream hosts may hold (capacity), hold, and configured streams unheld.",
    )
    for state, value in (
        ("capacity", sum(pool.capacities)),
        ("held", pool.held),
        ("unheld", pool.unheld),
    ):
        streams.add(float(value), state=state)
    return [workers, streams]


def holding(client: redis.Redis, cluster: str) -> tuple[list[str], list[str]]:
    """The namespaces and the nodes that hold pods now, from the counts the fold keeps
    (``store.namespaces_key``, ``store.node_verdicts_key``): one round trip sized by
    namespaces and nodes, never a scan of the keyspace."""
    pipe = client.pipeline(transaction=False)
    pipe.hkeys(store.namespaces_key(cluster))
    pipe.hkeys(store.node_verdicts_key(cluster))
    namespaces, handed = pipe.execute()
    nodes = {field.decode().partition(store.NAME_SEPARATOR)[0] for field in handed}
    return sorted(ns.decode() for ns in namespaces), sorted(nodes)


def _verdict_counts(client: redis.Redis, cluster: str, family: Family) -> None:
    pipe = client.pipeline(transaction=False)
    for verdict in v.VERDICT_NAMES:
        pipe.zcard(store.index_key(cluster, "verdict", verdict))
    for verdict, count in zip(v.VERDICT_NAMES, pipe.execute(), strict=True):
        family.add(float(count), cluster=cluster, verdict=verdict)


def _merge(families: list[Family]) -> list[Family]:
    """One family per name, whatever the number of clusters (the format wants that)."""
    merged: dict[str, Family] = {}
    for family in families:
        if family.name in merged:
            merged[family.name].samples.extend(family.samples)
        else:
            merged[family.name] = Family(
                family.name, family.kind, family.help, list(family.samples)
            )
    return list(merged.values())
