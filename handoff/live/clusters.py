"""The registry of watched clusters (``handoff:clusters``), written through from the DB.

Below the store: the store, the tasks and the sources all name a cluster's streams
(``WATCH_RESOURCES``, ``FOLD``) and read its ``ClusterConfig`` from here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
import redis

CLUSTERS = "handoff:clusters"  # hash: name -> ClusterConfig JSON (written through from the DB)
WATCH_RESOURCES = ("pods", "nodes", "events")
FOLD = "fold"


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
