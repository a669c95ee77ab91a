"""The read side of the live store: what the web (pages, API, websocket) and the fold's
push read. Pages of pods are ``live/paging``; this module holds the rest: counts, duration
percentiles, what changed since a cursor, the cluster's clock, one pod with its
namesakes and watch gaps, the nodes' summary, and whether a cluster exists.

The web reads the store only through these two modules (an import contract says so);
stored views are decoded here with ``handoff.core.viewcodec``.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from handoff.core import verdicts as v
from handoff.core.durations import not_observed, summarise
from handoff.core.histogram import Histogram
from handoff.core.owners import LOOP_WINDOW, STALE_AFTER, stale_note
from handoff.core.trace import format_time, parse_time
from handoff.core.viewcodec import decode_view
from handoff.live import aggregates, clusters, search, store
from handoff.live.aggregates import NODE_DURATIONS, read_lane
from handoff.live.clusters import ClusterConfig
from handoff.live.paging import views

ATTENTION: tuple[str, ...] = tuple(n for n in store.RANKED if v.VERDICTS[n].attention)
SAMPLE = 3000  # pods read for the duration percentiles of a bigger cluster
RESUME_MAX = 2000  # changes a resuming client is sent; beyond that it reloads


# ------------------------------------------------------------------ summary


def counts(client: redis.Redis, cluster: str) -> dict[str, Any]:
    """Pods per verdict, all pods, pods needing attention: one round trip."""
    pipe = client.pipeline(transaction=False)
    queue_counts(pipe, cluster)
    return read_counts(pipe.execute())


def counts_of(client: redis.Redis, clusters: list[str]) -> dict[str, dict[str, Any]]:
    """``counts`` of each of ``clusters``: one round trip for them all."""
    pipe = client.pipeline(transaction=False)
    for cluster in clusters:
        queue_counts(pipe, cluster)
    replies = pipe.execute()
    step = len(v.VERDICT_NAMES) + 1
    return {cluster: read_counts(replies[: (i + 1) * step]) for i, cluster in enumerate(clusters)}


def queue_counts(pipe: redis.client.Pipeline, cluster: str) -> None:
    """Queue the counts' reads last in ``pipe`` (the fold's flush reads them in the
    MULTI/EXEC that wrote the pods: as of that write, without a round trip of their own)."""
    for name in v.VERDICT_NAMES:
        pipe.zcard(store.index_key(cluster, "verdict", name))
    pipe.hlen(store.pods_key(cluster))


def read_counts(replies: list[Any]) -> dict[str, Any]:
    """``counts`` from the replies of a pipeline whose last commands ``queue_counts``
    queued."""
    replies = replies[-len(v.VERDICT_NAMES) - 1 :]
    verdicts = dict(zip(v.VERDICT_NAMES, replies[:-1], strict=True))
    return {
        "verdicts": verdicts,
        "pods": replies[-1],
        "attention": sum(verdicts[name] for name in ATTENTION),
    }


def durations(client: redis.Redis, cluster: str, sample: int = SAMPLE) -> dict[str, Any]:
    """p50/p90/p99 per handoff duration: exact up to ``sample`` pods, beyond that over a
    uniform random sample of that many (reading 150,000 views per request is not an
    option). ``sampled`` says how many pods the figures come from."""
    key = store.pods_key(cluster)
    total = client.hlen(key)
    if total <= sample:
        raws = client.hvals(key)
    else:
        uids = client.hrandfield(key, sample)
        raws = [raw for raw in client.hmget(key, uids) if raw]
    samples: dict[str, list[float]] = {}
    unobserved: Counter[str] = Counter()
    for raw in raws:
        view = decode_view(raw)
        for name, value in view["durations"].items():
            if value is not None:
                samples.setdefault(name, []).append(value)
        unobserved.update(not_observed(view["milestones"], view["durations"]))
    return {"pods": total, "sampled": len(raws), "durations": summarise(samples, unobserved)}


# ------------------------------------------------------------------- resume


@dataclass
class Resume:
    """What a client holding ``cursor`` missed: pods to upsert and uids to drop, or
    ``reload`` (with why) when that cannot be told or is more than a reload costs."""

    pods: list[dict[str, Any]]
    removed: list[str]
    reload: str | None = None


def changed_since(client: redis.Redis, cluster: str, cursor: str) -> Resume:
    try:
        ms, _ = store.stream_id_key(cursor)
    except ValueError:
        return Resume([], [], reload="cursor is not a stream id")
    first = client.xrange(store.events_key(cluster), count=1)
    if not first or store.stream_id_key(first[0][0])[0] > ms:
        return Resume([], [], reload="cursor is older than the retained stream")
    removed_key = store.removed_key(cluster)
    pipe = client.pipeline(transaction=False)
    pipe.zcount(store.changed_key(cluster), ms, "+inf")
    pipe.zcard(removed_key)
    pipe.zrange(removed_key, 0, 0, withscores=True)
    changed, kept, oldest = pipe.execute()
    if kept >= store.REMOVED_KEPT and oldest and oldest[0][1] > ms:
        return Resume([], [], reload="removals since the cursor are no longer all known")
    if changed > RESUME_MAX:
        return Resume([], [], reload=f"more than {RESUME_MAX} pods changed")
    members = client.zrangebyscore(store.changed_key(cluster), ms, "+inf")
    uids = [store.member_uid(member) for member in members]
    removed = [u.decode() for u in client.zrangebyscore(removed_key, ms, "+inf")]
    found = views(client, cluster, uids)
    return Resume([found[uid] for uid in uids if uid in found], removed)


# ---------------------------------------------------------- the fold's clock


CLOCK = ("cursor", "evaluated_at", "flushed")  # the fields ``clock`` reads


def progress(client: redis.Redis, cluster: str, *fields: str) -> dict[str, str]:
    """The fold's progress hash (cursor, evaluated_at, flushed, pods, nodes, ...), or only
    ``fields`` of it."""
    return store.fold_state(client, cluster, *fields)


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


def head(client: redis.Redis, cluster: str, now: float | None = None) -> dict[str, str | None]:
    """``stream_cursor`` and ``evaluated_at`` of a cluster now (``clock`` of its fold)."""
    return clock(store.fold_state(client, cluster, *CLOCK), now)


# ---------------------------------------------------------------- owners


def owners(
    client: redis.Redis, cluster: str, now: float | None = None, fold: dict[str, str] | None = None
) -> dict[str, Any]:
    """The owners needing attention (``store.owners_key``): controllers failing to create
    pods, newest first, and loops still going, most pods first. Whether a failure is
    stale and a loop still active is judged on the cluster's clock now, not when the
    fold wrote the record. ``fold``: the fold's ``CLOCK`` fields, when already read."""
    known = clock(fold, now) if fold is not None else head(client, cluster, now)
    at = parse_time(known["evaluated_at"] or format_time(time.time()))
    failing, loops = [], []
    for raw in store.owner_records(client, cluster):
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        failure, loop = record.get("failure"), record.get("loop")
        if failure:
            if not failure["stale"] and at - parse_time(failure["last"]) > STALE_AFTER:
                failure["stale"] = True
                failure["explanation"] += stale_note(failure["owner"]["kind"])
            failing.append(failure)
        if loop and at - parse_time(loop["last"]) <= LOOP_WINDOW:
            loops.append(loop)
    failing.sort(key=lambda f: f["last"], reverse=True)
    loops.sort(key=lambda x: (-x["count"], x["key"]))
    return {"failing": failing, "loops": loops}


# ------------------------------------------------------------ one cluster


def configs(client: redis.Redis) -> dict[str, ClusterConfig]:
    """Every registered cluster's configuration, by name."""
    return clusters.clusters(client)


def config(client: redis.Redis, cluster: str) -> ClusterConfig | None:
    """A registered cluster's configuration; None for an unknown name."""
    return clusters.cluster(client, cluster)


def exists(client: redis.Redis, cluster: str) -> bool:
    """Registered, or folded into the store (a cluster removed keeps its data)."""
    return (
        clusters.cluster(client, cluster) is not None or client.exists(store.fold_key(cluster)) > 0
    )


def fold_nodes(client: redis.Redis, cluster: str) -> dict[str, Any]:
    """The fold's summary of every node ({name: {exists, ready, down, ...}}) and the
    time it judged at."""
    evaluated_at, nodes_json = client.hmget(store.fold_key(cluster), "evaluated_at", "nodes_json")
    return {
        "evaluated_at": evaluated_at.decode() if evaluated_at else None,
        "nodes": orjson.loads(nodes_json) if nodes_json else {},
    }


def handed(client: redis.Redis, cluster: str) -> dict[str, dict[str, int]]:
    """node -> verdict -> pods of that verdict handed to the node, as the fold keeps them
    (``store.node_verdicts_key``): one read sized by nodes, not by pods."""
    out: dict[str, dict[str, int]] = {}
    for field, raw in client.hgetall(store.node_verdicts_key(cluster)).items():
        count = int(raw)
        if count > 0:
            node, _, verdict = field.decode().rpartition(store.NAME_SEPARATOR)
            out.setdefault(node, {})[verdict] = count
    return out


def _histograms(raw: dict[bytes, bytes]) -> dict[str, Histogram]:
    """A kept histogram hash ("<duration>:<bucket>|z|u" -> pods) by duration."""
    out: dict[str, Histogram] = {}
    for field, count in raw.items():
        name, _, suffix = field.decode().partition(":")
        out.setdefault(name, Histogram()).add_field(suffix, int(count))
    return out


def fleet_kept(client: redis.Redis, cluster: str, lanes: int) -> dict[str, Any]:
    """What the fold keeps for the fleet page (``live/aggregates``), in one round trip
    plus the lanes: the cluster's duration histograms, pods per verdict, all pods, the
    ``lanes`` newest pods' swimlane entries (oldest first) and the pods handed per node
    and verdict. Sized by buckets, nodes and ``lanes``, not by pods."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(aggregates.hist_key(cluster))
    pipe.zrevrange(aggregates.recent_key(cluster), 0, lanes - 1)
    pipe.hget(store.fold_key(cluster), "evaluated_at")
    hist, newest, evaluated_at = pipe.execute()
    uids = list(reversed(newest)) if lanes > 0 else []
    raws = client.hmget(aggregates.lanes_key(cluster), uids) if uids else []
    return {
        "evaluated_at": evaluated_at.decode() if evaluated_at else None,
        "durations": _histograms(hist),
        "lanes": [read_lane(u.decode(), raw) for u, raw in zip(uids, raws, strict=True) if raw],
        **counts(client, cluster),
        "handed": handed(client, cluster),
    }


def node_histograms(
    client: redis.Redis, cluster: str, nodes: list[str]
) -> dict[str, dict[str, Histogram]]:
    """node -> duration -> the kept histogram of the pods handed to it (NODE_DURATIONS)."""
    pipe = client.pipeline(transaction=False)
    for node in nodes:
        pipe.hgetall(aggregates.node_hist_key(cluster, node))
    out = {}
    for node, raw in zip(nodes, pipe.execute(), strict=True):
        kept = _histograms(raw)
        out[node] = {name: kept.get(name, Histogram()) for name in NODE_DURATIONS}
    return out


def on_missing_nodes(
    client: redis.Redis, cluster: str, nodes: list[str]
) -> Iterator[dict[str, Any]]:
    """The views of the pods on these nodes whose view says the node does not exist:
    reads only those nodes' pods (the node index), a batch at a time."""
    for node in nodes:
        uids = [
            uid.decode() for uid in client.zrange(store.index_key(cluster, "node", node), 0, -1)
        ]
        for start in range(0, len(uids), 2000):
            for view in views(client, cluster, uids[start : start + 2000]).values():
                if view.get("node_exists") is False:
                    yield view


def all_views(client: redis.Redis, cluster: str) -> Iterator[dict[str, Any]]:
    """Every stored view, a batch at a time (exports and whole-cluster digests)."""
    for _, raw in client.hscan_iter(store.pods_key(cluster), count=2000):
        yield decode_view(raw)


def pod_views(client: redis.Redis, cluster: str) -> dict[str, dict[str, Any]]:
    """Every stored view by uid, at once (tests and small clusters)."""
    return {uid: decode_view(raw) for uid, raw in store.pod_blobs(client, cluster).items()}


# ---------------------------------------------------------------- one pod


def pick(candidates: list[dict[str, Any]], uid: str | None) -> dict[str, Any] | None:
    """The pod a page means: the given uid, else the newest of the pods with that name."""
    if uid:
        return next((c for c in candidates if c.get("uid") == uid), None)
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c["milestones"].get("created") or "", c.get("uid") or ""))


def with_others(view: dict[str, Any], candidates: list[dict[str, Any]]) -> dict[str, Any]:
    """The pod view plus the other pods that had the same namespace/name (name reuse)."""
    others = [
        {"uid": c.get("uid"), "created": c["milestones"].get("created"), "verdict": c["verdict"]}
        for c in candidates
        if c is not view
    ]
    return {**view, "same_name": sorted(others, key=lambda o: o["created"] or "")}


def pod(
    client: redis.Redis, cluster: str, namespace: str, name: str, uid: str | None
) -> dict[str, Any] | None:
    """The pod page's data: the view (``uid``, else the newest pod of that name), the
    other pods of that name, and the watch gaps in its life: two round trips (the name's
    pods from the name index, then their views and the blind intervals)."""
    uids = _namesakes(client, cluster, namespace, name)
    if uid and uid not in uids:
        uids.append(uid)
    pipe = client.pipeline(transaction=False)
    if uids:
        pipe.hmget(store.pods_key(cluster), uids)
    pipe.lrange(store.blind_key(cluster), 0, -1)
    *raws, blind = pipe.execute()
    candidates = [
        view
        for view in (decode_view(raw) for raw in (raws[0] if raws else []) if raw)
        if (view["namespace"], view["name"]) == (namespace, name)
    ]
    chosen = pick(candidates, uid)
    if chosen is None:
        return None
    gaps = watch_gaps(client, cluster, chosen, blind)
    return {**with_others(chosen, candidates), "watch_gaps": gaps}


def _namesakes(client: redis.Redis, cluster: str, namespace: str, name: str) -> list[str]:
    """The uids of a name's pods (case aside: the caller compares the views' names),
    from the fold's name index (``live/search``): no scan."""
    text = search.fold(namespace, name)
    found = search.namesakes(client, cluster, text)
    if found is not None:
        return found
    named = search.lookup(client, cluster, search.candidates(client, cluster, text))
    return sorted(uid for uid, (folded, _) in named.items() if folded == text)


def watch_gaps(
    client: redis.Redis, cluster: str, view: dict[str, Any], blind: list[bytes] | None = None
) -> list[dict[str, str]]:
    """The cluster's blind intervals (a watch relisted after a gap) that overlap the
    pod's life: what happened to it then was not seen as it happened. ``blind``: the
    cluster's list as read already, else read here."""
    milestones = view.get("milestones") or {}
    born = milestones.get("created") or milestones.get("bound") or ""
    gone = milestones.get("deleted") or "9999"
    gaps = []
    if blind is None:
        blind = client.lrange(store.blind_key(cluster), 0, -1)
    for raw in blind:
        gap = orjson.loads(raw)
        if isinstance(gap, dict) and gap.get("to", "") >= born and gap.get("from", "") <= gone:
            gaps.append(gap)
    return sorted(gaps, key=lambda g: g.get("from", ""))
