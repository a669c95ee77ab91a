"""The watch pool: which stream hosts are alive, how many streams each holds and may hold,
and how many configured streams nobody holds.

Each stream host (``handoff.live.hosting.StreamHost``, one per watch worker process) notes
itself in ``handoff:hosts`` at every reconcile with its capacity, the streams it holds and
until when the record counts (the lease ttl, or two reconciles if longer: a killed host
drops out on its own once its leases have lapsed), and deletes the records whose time has
passed, atomically: a reader never writes, so a host that renewed its record just after a
reader judged it stale cannot lose it to that reader. /healthz, `status`, the home page and
the board read the pool through ``handoff.live.health``, from one ``standing`` that also
holds what the streams' health is judged on (two round trips, however many clusters);
``supervise`` reads ``pool`` to start a host when none has room.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson
import redis

from handoff.live import clusters, store

HOSTS = "handoff:hosts"  # hash: host id -> {"capacity", "held", "until"} JSON


# KEYS[1] the hosts hash; ARGV the host, its record, and the time now. Writes the record,
# then deletes every record whose "until" has passed (or that is not a record): in one
# script, so no host renews its record between the judgement and the deletion.
_NOTE = """
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
local now = tonumber(ARGV[3])
local records = redis.call('hgetall', KEYS[1])
for i = 1, #records, 2 do
  local ok, record = pcall(cjson.decode, records[i + 1])
  local til = ok and type(record) == 'table' and tonumber(record['until'])
  if not til or til < now then
    redis.call('hdel', KEYS[1], records[i])
  end
end
"""


def note_host(
    client: redis.Redis, host: str, capacity: int, held: int, until: float,
    now: float | None = None,
) -> None:  # fmt: skip
    """Note ``host``'s record and delete the records of hosts whose time had passed
    ``now`` (killed ones)."""
    record = orjson.dumps({"capacity": capacity, "held": held, "until": until})
    client.eval(_NOTE, 1, HOSTS, host, record, repr(time.time() if now is None else now))


def drop_host(client: redis.Redis, host: str) -> None:
    client.hdel(HOSTS, host)


def live_hosts(client: redis.Redis, now: float) -> dict[str, dict]:
    """Hosts whose record still counts ``now``. Read only: older records (killed hosts)
    are left to the next live host's ``note_host``."""
    return _alive(client.hgetall(HOSTS), now)


def _alive(records: dict[bytes, bytes], now: float) -> dict[str, dict]:
    alive = {}
    for host, raw in records.items():
        try:
            record = orjson.loads(raw)
            fresh = float(record["until"]) >= now
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            fresh = False
        if fresh:
            alive[host.decode()] = record
    return alive


def wanted(config: clusters.ClusterConfig, client: redis.Redis) -> list[str]:
    """The streams of a cluster a host should hold: all but a simulator run that ended."""
    states = {
        (config.name, stream): store.stream_state(client, config.name, stream)
        for stream in config.streams()
        if stream == "simulator"
    }
    return _wanted(config, states)


def _wanted(
    config: clusters.ClusterConfig, states: dict[tuple[str, str], dict[str, str]]
) -> list[str]:
    return [
        stream
        for stream in config.streams()
        if not (stream == "simulator" and states.get((config.name, stream), {}).get("finished"))
    ]


@dataclass(frozen=True)
class Standing:
    """Everything the watch pool and the streams' health are judged on, read in two round
    trips whatever the number of clusters (the registry, then one pipeline): the
    registered clusters, the live hosts' records, each configured stream's state hash and
    lease holder, and each cluster's fold cursor."""

    registered: dict[str, clusters.ClusterConfig]
    hosts: dict[str, dict]
    states: dict[tuple[str, str], dict[str, str]]
    holders: dict[tuple[str, str], str | None]
    cursors: dict[str, str]

    def pool(self) -> Pool:
        """The pool as it stands: live hosts from their records, unheld streams from the
        leases."""
        unheld = sum(
            1
            for name, config in self.registered.items()
            for stream in _wanted(config, self.states)
            if self.holders.get((name, stream)) is None
        )
        capacities = tuple(int(h.get("capacity", 0)) for h in self.hosts.values())
        held = sum(int(h.get("held", 0)) for h in self.hosts.values())
        room = sum(
            max(0, int(h.get("capacity", 0)) - int(h.get("held", 0))) for h in self.hosts.values()
        )
        return Pool(capacities, held, room, unheld)


def standing(client: redis.Redis, now: float) -> Standing:
    """Read the ``Standing`` of every registered cluster's streams now."""
    registered = clusters.clusters(client)
    streams = [(name, stream) for name, config in registered.items() for stream in config.streams()]
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(HOSTS)
    for name, stream in streams:
        pipe.hgetall(store.stream_key(name, stream))
        pipe.get(store.lease_key(name, stream))
    for name in registered:
        pipe.hget(store.fold_key(name), "cursor")
    records, *replies = pipe.execute()
    pairs, cursors = replies[: 2 * len(streams)], replies[2 * len(streams) :]
    return Standing(
        registered=registered,
        hosts=_alive(records, now),
        states={key: store.decoded(raw) for key, raw in zip(streams, pairs[::2], strict=True)},
        holders={
            key: None if raw is None else raw.decode()
            for key, raw in zip(streams, pairs[1::2], strict=True)
        },
        cursors={name: raw.decode() for name, raw in zip(registered, cursors, strict=True) if raw},
    )


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
    """The pool as it stands (``Standing.pool``)."""
    return standing(client, now).pool()
