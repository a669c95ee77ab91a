"""Redis layout of the live ingestion: one place for every key and every write.

Every key of a cluster carries the cluster's name in braces (``handoff:{prod}:events``):
a Redis Cluster hash tag, so one cluster's keys live in one slot and the scripts and
pipelines below stay single-slot. docs/architecture.md ("Redis layout") describes them.

Writes are idempotent: stream entries are folded by a deterministic, idempotent timeline,
pod views are overwritten whole, index updates are set operations. At-least-once delivery
anywhere on the path changes nothing.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import redis

CLUSTERS = "handoff:clusters"  # hash: name -> ClusterConfig JSON (written through from the DB)
STREAM_FIELD = b"l"  # the one field of a stream entry: a trace v1 line
WATCH_RESOURCES = ("pods", "nodes", "events")
FOLD = "fold"


def k(cluster: str, *parts: str) -> str:
    return ":".join((f"handoff:{{{cluster}}}", *parts))


def events_key(cluster: str) -> str:
    return k(cluster, "events")


def lease_key(cluster: str, stream: str) -> str:
    return k(cluster, "lease", stream)


def stream_key(cluster: str, stream: str) -> str:
    """Hash of one stream's progress: rv, last_event, events, last_error, ..."""
    return k(cluster, "stream", stream)


def known_key(cluster: str, resource: str) -> str:
    """Hash uid -> [namespace, name, resourceVersion] of the objects a watch holds."""
    return k(cluster, "known", resource)


def pods_key(cluster: str) -> str:
    return k(cluster, "pods")


def nodes_key(cluster: str) -> str:
    return k(cluster, "nodes")


INDEXES = ("verdict", "ns", "node")


def index_key(cluster: str, by: str, value: str) -> str:
    return k(cluster, "idx", by, value)


def changed_key(cluster: str) -> str:
    return k(cluster, "idx", "changed")


def fold_key(cluster: str) -> str:
    return k(cluster, "fold")


def snapshot_key(cluster: str) -> str:
    return k(cluster, "snapshot")


def blind_key(cluster: str) -> str:
    return k(cluster, "blind")


def pending_key(cluster: str, stream: str) -> str:
    return k(cluster, "pending", stream)


def cluster_keys(client: redis.Redis, cluster: str) -> Iterator[bytes]:
    yield from client.scan_iter(match=f"handoff:{{{cluster}}}:*", count=1000)


# ------------------------------------------------------------------ clusters


@dataclass
class ClusterConfig:
    """How to reach a cluster. Never credentials: a kubeconfig *path* and a context name."""

    name: str
    kind: str  # kubeconfig | in-cluster | simulator | trace
    kubeconfig: str = ""
    context: str = ""
    scenario: str = ""
    trace: str = ""
    options: dict[str, Any] = field(default_factory=dict)

    def streams(self) -> tuple[str, ...]:
        """The streams a worker runs for this cluster: watches, or one feeding source."""
        if self.kind in ("kubeconfig", "in-cluster"):
            return (*WATCH_RESOURCES, FOLD)
        if self.kind == "simulator":
            return ("simulator", FOLD)
        return (FOLD,)  # trace clusters are fed by `replay`


def register_cluster(client: redis.Redis, config: ClusterConfig) -> None:
    client.hset(CLUSTERS, config.name, orjson.dumps(asdict(config)))


def unregister_cluster(client: redis.Redis, name: str) -> None:
    client.hdel(CLUSTERS, name)


def clusters(client: redis.Redis) -> dict[str, ClusterConfig]:
    return {
        name.decode(): ClusterConfig(**orjson.loads(raw))
        for name, raw in sorted(client.hgetall(CLUSTERS).items())
    }


def cluster(client: redis.Redis, name: str) -> ClusterConfig | None:
    raw = client.hget(CLUSTERS, name)
    return None if raw is None else ClusterConfig(**orjson.loads(raw))


def forget_cluster(client: redis.Redis, name: str) -> int:
    """Delete every key of a cluster (its registration is separate)."""
    removed = 0
    batch: list[bytes] = []
    for key in cluster_keys(client, name):
        batch.append(key)
        if len(batch) >= 500:
            removed += client.delete(*batch)
            batch = []
    if batch:
        removed += client.delete(*batch)
    return removed


# ------------------------------------------------------------------- leases

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def holder_id(task_id: str | None = None) -> str:
    """Who holds a lease: host, process and (when known) the Celery task."""
    base = f"{socket.gethostname()}:{os.getpid()}"
    return f"{base}:{task_id}" if task_id else base


class Lease:
    """At most one live holder per (cluster, stream): SET NX PX, renewed by compare-and-set."""

    def __init__(self, client: redis.Redis, key: str, holder: str, ttl: float) -> None:
        self.client = client
        self.key = key
        self.holder = holder
        self.ttl_ms = int(ttl * 1000)

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.holder, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        """False when the lease lapsed and someone else (or no one) holds it."""
        return bool(self.client.eval(_RENEW, 1, self.key, self.holder, self.ttl_ms))

    def release(self) -> None:
        self.client.eval(_RELEASE, 1, self.key, self.holder)

    def keep(
        self, stop: threading.Event, on_lost: Callable[[], object] = lambda: None
    ) -> threading.Thread:
        """Renew every ttl/3 from a thread until ``stop``; on loss set ``stop``, call on_lost."""

        def renew() -> None:
            while not stop.wait(self.ttl_ms / 3000):
                try:
                    held = self.renew()
                except redis.RedisError:
                    continue  # keep trying until the lease would lapse anyway
                if not held:
                    stop.set()
                    on_lost()

        thread = threading.Thread(target=renew, daemon=True, name=f"lease {self.key}")
        thread.start()
        return thread


def holder(client: redis.Redis, cluster: str, stream: str) -> str | None:
    raw = client.get(lease_key(cluster, stream))
    return None if raw is None else raw.decode()


# ------------------------------------------------------------------ streams


def append(
    client: redis.Redis | redis.client.Pipeline,
    cluster: str,
    lines: Iterable[bytes],
    maxlen: int | None = None,
) -> None:
    """XADD trace lines to the cluster's stream (approximate MAXLEN trimming)."""
    key = events_key(cluster)
    for line in lines:
        client.xadd(key, {STREAM_FIELD: line}, maxlen=maxlen, approximate=True)


def read_stream(
    client: redis.Redis, cluster: str, after: str = "0-0", batch: int = 5000
) -> Iterator[tuple[str, bytes]]:
    """Every retained entry after ``after``: (stream id, line)."""
    key = events_key(cluster)
    start = "(" + after if after != "0-0" else "-"
    while True:
        entries = client.xrange(key, min=start, max="+", count=batch)
        if not entries:
            return
        for entry_id, fields in entries:
            yield entry_id.decode(), fields[STREAM_FIELD]
        start = "(" + entries[-1][0].decode()


def stream_id_key(entry_id: str | bytes) -> tuple[int, int]:
    """Stream ids as comparable numbers: cursors compare with this."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def note_stream(
    client: redis.Redis | redis.client.Pipeline, cluster: str, stream: str, **values: Any
) -> None:
    client.hset(stream_key(cluster, stream), mapping={k: _text(v) for k, v in values.items()})


def stream_state(client: redis.Redis, cluster: str, stream: str) -> dict[str, str]:
    raw = client.hgetall(stream_key(cluster, stream))
    return {key.decode(): value.decode() for key, value in raw.items()}


def _text(value: Any) -> str:
    return (
        value if isinstance(value, str) else repr(value) if isinstance(value, float) else str(value)
    )


# ------------------------------------------------------------ known objects


def remember(
    pipe: redis.client.Pipeline, cluster: str, resource: str, type_: str, obj: dict[str, Any]
) -> None:
    """Keep the watch's view of which objects exist, for reconciling after a 410."""
    meta = obj.get("metadata") or {}
    uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    if type_ == "DELETED":
        pipe.hdel(known_key(cluster, resource), uid)
    else:
        value = [meta.get("namespace", ""), meta.get("name", ""), meta.get("resourceVersion", "")]
        pipe.hset(known_key(cluster, resource), uid, orjson.dumps(value))


def known(client: redis.Redis, cluster: str, resource: str) -> dict[str, list[str]]:
    return {
        uid.decode(): orjson.loads(raw)
        for uid, raw in client.hgetall(known_key(cluster, resource)).items()
    }


# ---------------------------------------------------------------- pod state


def write_pods(
    pipe: redis.client.Pipeline,
    cluster: str,
    views: dict[str, tuple[dict[str, Any], float]],
    previous: dict[str, tuple[str, str, str]],
) -> None:
    """Store pod views and move their index entries. ``previous`` (uid -> verdict,
    namespace, node as last written) is updated in place. One command per index key
    touched, not per pod: a burst moves thousands of pods between a few indexes."""
    if not views:
        return
    blobs = {}
    changed = {}
    adds: dict[str, dict[str, float]] = {}
    removes: dict[str, list[str]] = {}
    for uid, (view, last_change) in views.items():
        blobs[uid] = orjson.dumps(view)
        changed[uid] = last_change
        now = (view["verdict"], view["namespace"], view["node"] or "")
        before = previous.get(uid)
        if before == now:
            continue
        for by, old, new in zip(INDEXES, before or ("", "", ""), now, strict=True):
            if before is not None and old != new:
                removes.setdefault(index_key(cluster, by, old), []).append(uid)
            if before is None or old != new:
                adds.setdefault(index_key(cluster, by, new), {})[uid] = last_change
        previous[uid] = now
    for key, uids in removes.items():
        pipe.zrem(key, *uids)
    for key, members in adds.items():
        pipe.zadd(key, members)
    pipe.hset(pods_key(cluster), mapping=blobs)
    pipe.zadd(changed_key(cluster), changed)


def drop_pods(
    pipe: redis.client.Pipeline,
    cluster: str,
    uids: Iterable[str],
    previous: dict[str, tuple[str, str, str]],
) -> None:
    for uid in uids:
        before = previous.pop(uid, None)
        if before is not None:
            for by, value in zip(INDEXES, before, strict=True):
                pipe.zrem(index_key(cluster, by, value), uid)
        pipe.hdel(pods_key(cluster), uid)
        pipe.zrem(changed_key(cluster), uid)


def pod_views(client: redis.Redis, cluster: str) -> dict[str, dict[str, Any]]:
    return {
        uid.decode(): orjson.loads(raw) for uid, raw in client.hgetall(pods_key(cluster)).items()
    }


def pods_by(client: redis.Redis, cluster: str, by: str, value: str) -> list[str]:
    """Pod uids in an index (verdict, ns or node), most recently changed first."""
    return [uid.decode() for uid in client.zrevrange(index_key(cluster, by, value), 0, -1)]


def fold_state(client: redis.Redis, cluster: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(fold_key(cluster)).items()}
