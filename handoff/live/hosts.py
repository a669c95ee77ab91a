"""The watch pool: which stream hosts are alive, how many streams each holds and may hold,
and how many configured streams nobody holds.

Each stream host (``handoff.live.hosting.StreamHost``, one per watch worker process) notes
itself in ``handoff:hosts`` at every reconcile with its capacity, the streams it holds and
until when the record counts (the lease ttl, or two reconciles if longer: a killed host
drops out on its own once its leases have lapsed). /healthz, `status`, the home page and
the board read ``pool`` through ``handoff.live.health``; ``supervise`` reads it to start a
host when none has room.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
import redis

from handoff.live import clusters, leases, store

HOSTS = "handoff:hosts"  # hash: host id -> {"capacity", "held", "until"} JSON


def note_host(client: redis.Redis, host: str, capacity: int, held: int, until: float) -> None:
    client.hset(HOSTS, host, orjson.dumps({"capacity": capacity, "held": held, "until": until}))


def drop_host(client: redis.Redis, host: str) -> None:
    client.hdel(HOSTS, host)


def live_hosts(client: redis.Redis, now: float) -> dict[str, dict]:
    """Hosts whose record still counts; older records (killed hosts) are deleted."""
    alive, dead = {}, []
    for host, raw in client.hgetall(HOSTS).items():
        try:
            record = orjson.loads(raw)
            fresh = float(record["until"]) >= now
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            fresh = False
        if fresh:
            alive[host.decode()] = record
        else:
            dead.append(host)
    if dead:
        client.hdel(HOSTS, *dead)
    return alive


def wanted(config: clusters.ClusterConfig, client: redis.Redis) -> list[str]:
    """The streams of a cluster a host should hold: all but a simulator run that ended."""
    return [
        stream
        for stream in config.streams()
        if not (
            stream == "simulator"
            and store.stream_state(client, config.name, stream).get("finished")
        )
    ]


@dataclass(frozen=True)
class Pool:
    """The live hosts' capacities and holdings, and the configured streams no one holds."""

    capacities: tuple[int, ...]
    held: int
    room: int  # streams the live hosts can still take
    unheld: int

    @property
    def full(self) -> bool:
        """Streams wait for a holder and no live host can take them: starvation."""
        return bool(self.capacities) and self.unheld > 0 and self.room == 0

    def problem(self) -> str | None:
        if not self.full:
            return None
        per = "/".join(str(size) for size in sorted(set(self.capacities))) + " per worker"
        return (
            f"watch pool full: {self.unheld} streams unheld "
            f"(capacity {per} × {len(self.capacities)} workers)"  # noqa: RUF001
        )

    def as_dict(self) -> dict:
        return {
            "workers": len(self.capacities),
            "capacity": sum(self.capacities),
            "held": self.held,
            "unheld": self.unheld,
            "full": self.full,
        }


def pool(client: redis.Redis, now: float) -> Pool:
    """The pool as it stands: live hosts from their records, unheld streams from the leases."""
    hosts = live_hosts(client, now)
    unheld = 0
    for name, config in clusters.clusters(client).items():
        for stream in wanted(config, client):
            if leases.holder(client, name, stream) is None:
                unheld += 1
    capacities = tuple(int(h.get("capacity", 0)) for h in hosts.values())
    held = sum(int(h.get("held", 0)) for h in hosts.values())
    room = sum(max(0, int(h.get("capacity", 0)) - int(h.get("held", 0))) for h in hosts.values())
    return Pool(capacities, held, room, unheld)
