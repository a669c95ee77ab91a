"""Shared by the ingestion tests: folding a cluster's stream, comparing timelines."""

from __future__ import annotations

from typing import Any

import redis

from handoff.live import clusters
from handoff.live.fold import Folder, FoldSettings

# The parts of a pod view that do not depend on when it was evaluated.
STABLE = ("namespace", "name", "uid", "node", "binding", "verdict", "reason", "milestones")


def fold_all(client: redis.Redis, cluster: str, **settings: Any) -> Folder:
    """A fold worker's whole job, in-process: restore, fold to the end, flush."""
    folder = Folder(client, cluster, FoldSettings(block_ms=1, **settings))
    folder.restore()
    while folder.step():
        pass
    folder.flush()
    return folder


def stable(views: dict[str, dict[str, Any]] | list[dict[str, Any]]) -> dict[str, Any]:
    items = views.values() if isinstance(views, dict) else views
    return {f"{v['namespace']}/{v['name']}/{v['uid']}": {k: v[k] for k in STABLE} for v in items}


def register(client: redis.Redis, name: str, kind: str = "trace", **fields: Any) -> None:
    clusters.register_cluster(client, clusters.ClusterConfig(name=name, kind=kind, **fields))


def everything_in(client: redis.Redis) -> bytes:
    """Every byte Redis holds, whatever the key's type."""
    out = []
    for key in client.scan_iter(count=1000):
        kind = client.type(key).decode()
        out.append(key)
        if kind == "string":
            out.append(client.get(key))
        elif kind == "hash":
            out.extend(b for pair in client.hgetall(key).items() for b in pair)
        elif kind == "list":
            out.extend(client.lrange(key, 0, -1))
        elif kind == "set":
            out.extend(client.smembers(key))
        elif kind == "zset":
            out.extend(client.zrange(key, 0, -1))
        elif kind == "stream":
            out.extend(v for _, fields in client.xrange(key) for v in fields.values())
    return b"\n".join(out)
