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
from itertools import count
from operator import itemgetter
from typing import Any

import msgspec
import orjson
import redis

from handoff.core import verdicts as v
from handoff.core.explain import Context, explain
from handoff.core.facts import parse_admission_message
from handoff.core.trace import parse_time

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


INDEXES = ("verdict", "ns", "node")  # moved by write_pods when ``previous`` says so
BINDING = "binding"  # the fourth index: moved on every write (see write_pods)
# Bindings with an index. "scheduler", most pods of most clusters, has none: it is "in none
# of these", which saves Redis a sorted-set entry per pod ("" is not bound to a node yet).
INDEXED_BINDINGS = ("", "unknown", "manual", "static")


def index_key(cluster: str, by: str, value: str) -> str:
    return k(cluster, "idx", by, value)


def changed_key(cluster: str) -> str:
    return k(cluster, "idx", "changed")


def removed_key(cluster: str) -> str:
    """Zset uid -> cursor ms when it left the store: the removals a resuming client missed."""
    return k(cluster, "removed")


# ------------------------------------------------------------------- ranking
#
# Every pod index is a zset scored by the pod's *rank*: its verdict's place in the severity
# order times RANK_SPAN, plus its creation time in epoch seconds. Ascending score is the
# triage order (worst first, then oldest first), and one verdict is one score range, so a
# filtered, ordered page is a ZRANGE BYSCORE on one index, never a scan of all pods.

RANK_SPAN = 1e10  # seconds: creation times stay below it until the year 2286
NOT_CREATED = RANK_SPAN - 1  # pods with no known creation time sort last in their verdict
RANKED: tuple[str, ...] = tuple(sorted(v.VERDICTS, key=lambda name: -v.severity(name)))
_RANK = {name: index for index, name in enumerate(RANKED)}
NAME_SEPARATOR = "\n"  # change index members: namespace/name NAME_SEPARATOR uid


def rank_score(verdict: str, created: str | float | None) -> float:
    """The index score of a pod: worst verdict first, then oldest first."""
    if isinstance(created, str):
        created = _created_seconds(created)
    if created is None or not 0 <= created < NOT_CREATED:
        created = NOT_CREATED
    return _RANK.get(verdict, len(RANKED)) * RANK_SPAN + created


def verdict_range(verdict: str) -> tuple[float, float]:
    """[low, high) of the scores of one verdict's pods."""
    low = _RANK[verdict] * RANK_SPAN
    return low, low + RANK_SPAN


def verdict_of_score(score: float) -> str | None:
    index = int(score // RANK_SPAN)
    return RANKED[index] if 0 <= index < len(RANKED) else None


def name_member(namespace: str, name: str, uid: str) -> str:
    """A pod in the change index: its name first, so free-text search is a ZSCAN MATCH."""
    return f"{namespace}/{name}{NAME_SEPARATOR}{uid}"


def member_uid(member: bytes | str) -> str:
    text = member.decode() if isinstance(member, bytes) else member
    return text.rpartition(NAME_SEPARATOR)[2]


def _created_seconds(text: str) -> float | None:
    try:
        return parse_time(text)
    except ValueError:
        return None


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


# ------------------------------------------------------------------ stored views
#
# A pod view (``views.pod_view`` + ``deleted_blind``) is stored as MessagePack in a
# compact form: a positional array (VIEW_FORMAT first) instead of objects with their keys,
# each distinct instant once in a table and referred to by its place in it, stage names as
# their place in ``verdicts.STAGES``, and the explanation left out when ``explain`` gives
# the same text again from what the view keeps (it is rebuilt when read). The first item
# of each list of objects (stages, events, changes) is checked to have the keys, in the
# order, the form expects; a view of any other shape is stored as a plain MessagePack map.
# Views stored as JSON by versions before this one (they start with ``{``) still decode.
# ``decode_view`` is the one reader of stored views; the drop script reads them in Lua.

VIEW_FORMAT = 1
_VIEW_KEYS = (
    "namespace",
    "name",
    "uid",
    "node",
    "node_exists",
    "binding",
    "owner",
    "verdict",
    "reason",
    "explanation",
    "since",
    "milestones",
    "durations",
    "stages",
    "rejection",
    "podgc",
    "events",
    "changes",
)
_VIEW_KEYS_BLIND = (*_VIEW_KEYS, "deleted_blind")
_DURATION_KEYS = tuple(name for name, _start, _end in v.DURATIONS)
_STAGE_KEYS = ("name", "start", "end", "open")
_STAGE_NAMES = tuple(stage.name for stage in v.STAGES)
_STAGE_CODE = {name: index for index, name in enumerate(_STAGE_NAMES)}
_EVENT_KEYS = ("reason", "type", "source", "host", "message", "first", "last", "count")
_CHANGE_KEYS = ("at", "what")
_OWNER_KEYS = ("kind", "name")
_get_name, _get_start, _get_end = itemgetter("name"), itemgetter("start"), itemgetter("end")
_get_open = itemgetter("open")
_get_first, _get_last = itemgetter("first"), itemgetter("last")
_get_at, _get_what = itemgetter("at"), itemgetter("what")
_event_head = itemgetter("reason", "type", "source", "host", "message")
_get_count = itemgetter("count")
_INSTANT_TYPES = {str, type(None)}
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def encode_view(view: dict[str, Any]) -> bytes:
    """The stored form of a pod view; ``decode_view`` gives back an equal dict."""
    compact = _compact(view)
    return _encoder.encode(view if compact is None else compact)


def decode_view(raw: bytes | str) -> dict[str, Any]:
    """A stored pod view, in whichever form it was stored (compact, map, older JSON)."""
    if raw[:1] in (b"{", "{"):
        return orjson.loads(raw)
    data = _decoder.decode(raw)
    if type(data) is dict:
        return data
    return _expand(data)


def _compact(view: dict[str, Any]) -> list[Any] | None:
    keys = tuple(view)
    if keys != _VIEW_KEYS_BLIND and keys != _VIEW_KEYS:
        return None
    milestones, durations, owner = view["milestones"], view["durations"], view["owner"]
    stages, events, changes = view["stages"], view["events"], view["changes"]
    if (
        type(milestones) is not dict
        or tuple(milestones) != v.MILESTONES
        or type(durations) is not dict
        or tuple(durations) != _DURATION_KEYS
        or type(stages) is not list
        or (stages and tuple(stages[0]) != _STAGE_KEYS)
        or type(events) is not list
        or (events and tuple(events[0]) != _EVENT_KEYS)
        or type(changes) is not list
        or (changes and tuple(changes[0]) != _CHANGE_KEYS)
        or (owner is not None and tuple(owner) != _OWNER_KEYS)
    ):
        return None
    try:
        # Every instant of the view, in a fixed order (since, milestones, stage starts,
        # stage ends, changes, event firsts, event lasts): stored once each in ``table``,
        # and as their places in it in ``refs``.
        instants = [
            view["since"],
            *milestones.values(),
            *map(_get_start, stages),
            *map(_get_end, stages),
            *map(_get_at, changes),
            *map(_get_first, events),
            *map(_get_last, events),
        ]
        table = list(dict.fromkeys(instants))
        names = list(map(_get_name, stages))
        explanation = view["explanation"]
        if (
            not set(map(type, table)) <= _INSTANT_TYPES
            or not all(map(_STAGE_CODE.__contains__, names))
            or type(explanation) is not str
        ):
            return None
        refs = list(map(dict(zip(table, count())).__getitem__, instants))
        if explanation == explain(view["verdict"], view["reason"], _explain_context(view)):
            explanation = None  # rebuilt on read
        out = [
            VIEW_FORMAT,
            view["namespace"],
            view["name"],
            view["uid"],
            view["node"],
            view["node_exists"],
            view["binding"],
            None if owner is None else (owner["kind"], owner["name"]),
            view["verdict"],
            view["reason"],
            explanation,
            table,
            refs,
            list(durations.values()),
            list(map(_STAGE_CODE.__getitem__, names)),
            list(map(_get_open, stages)),
            view["rejection"],
            view["podgc"],
            list(map(_event_head, events)),
            list(map(_get_count, events)),
            list(map(_get_what, changes)),
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not the shape the compact form describes: stored as it is
    if len(keys) == len(_VIEW_KEYS_BLIND):
        out.append(view["deleted_blind"])
    return out


def _expand(data: list[Any]) -> dict[str, Any]:
    (
        fmt,
        namespace,
        name,
        uid,
        node,
        node_exists,
        binding,
        owner,
        verdict,
        reason,
        explanation,
        table,
        refs,
        spans,
        names,
        opens,
        rejection,
        podgc,
        heads,
        counts,
        whats,
        *blind,
    ) = data
    if fmt != VIEW_FORMAT:
        raise ValueError(f"stored pod view of an unknown format: {fmt!r}")
    instants = list(map(table.__getitem__, refs))
    marks = 1 + len(v.MILESTONES)
    starts = marks + len(names)
    ats = starts + len(names)
    firsts = ats + len(whats)
    lasts = firsts + len(heads)
    view = {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "node": node,
        "node_exists": node_exists,
        "binding": binding,
        "owner": None if owner is None else {"kind": owner[0], "name": owner[1]},
        "verdict": verdict,
        "reason": reason,
        "explanation": explanation,
        "since": instants[0],
        "milestones": dict(zip(v.MILESTONES, instants[1:marks], strict=True)),
        "durations": dict(zip(_DURATION_KEYS, spans, strict=True)),
        "stages": [
            {
                "name": _STAGE_NAMES[code],
                "start": start,
                "end": end,
                "open": is_open,
            }
            for code, start, end, is_open in zip(
                names, instants[marks:starts], instants[starts:ats], opens, strict=True
            )
        ],
        "rejection": rejection,
        "podgc": podgc,
        "events": [
            {
                "reason": head[0],
                "type": head[1],
                "source": head[2],
                "host": head[3],
                "message": head[4],
                "first": first,
                "last": last,
                "count": count,
            }
            for head, first, last, count in zip(
                heads, instants[firsts:lasts], instants[lasts:], counts, strict=True
            )
        ],
        "changes": [
            {"at": at, "what": what} for at, what in zip(instants[ats:firsts], whats, strict=True)
        ],
    }
    if blind:
        view["deleted_blind"] = blind[0]
    if explanation is None:
        view["explanation"] = explain(verdict, reason, _explain_context(view))
    return view


def _explain_context(view: dict[str, Any]) -> Context:
    """What ``explain`` needs, as far as the view itself tells (``views.pod_view`` knows
    more, such as the time since binding: a view whose explanation needs that keeps it)."""
    rejection, owner, podgc = view["rejection"], view["owner"], view["podgc"]
    if rejection is None and owner is None and podgc is None:
        return Context(node=view["node"] or "", binding=view["binding"])
    message = (rejection.get("message") or "") if rejection else ""
    return Context(
        node=view["node"] or "",
        binding=view["binding"],
        message=message,
        resources=parse_admission_message(message) if rejection else None,
        owner_kind=owner["kind"] if owner else "",
        podgc_from=(podgc["earliest"] or "") if podgc else "",
        podgc_to=(podgc["latest"] or "") if podgc else "",
    )


# ---------------------------------------------------------------- pod state


# Scores of the change index and the removal log: the fold's cursor (its ms part) *before*
# the write, read inside Redis so the writer need not know it. A client that holds cursor N
# has every change written before the flush that moved the cursor past N; whatever was
# written after has a score >= ms(N). Resuming from N is then ZRANGEBYSCORE changed ms(N)
# +inf: it may resend a pod it has (same millisecond), never miss one.
_CHANGED = """
local cursor = redis.call('hget', KEYS[1], 'cursor')
local ms = 0
if cursor then ms = tonumber(string.match(cursor, '^(%d+)')) or 0 end
for i = 1, #ARGV, 500 do
  local args = {}
  for j = i, math.min(i + 499, #ARGV) do
    args[#args + 1] = ms
    args[#args + 1] = ARGV[j]
  end
  redis.call('zadd', KEYS[2], unpack(args))
end
return ms
"""

# Dropping reads each view to find its index entries, so it needs no caller-side memory
# (a fold worker that just restored has none). It reads both stored forms: the compact
# MessagePack array (``encode_view``: namespace, name, node, binding and verdict at 2, 3,
# 5, 7 and 9 counting from 1, after VIEW_FORMAT at 1), a MessagePack map, and the JSON of
# older versions. ARGV: index key prefix, removal log cap, uids.
_DROP = (
    """
local cursor = redis.call('hget', KEYS[2], 'cursor')
local ms = 0
if cursor then ms = tonumber(string.match(cursor, '^(%d+)')) or 0 end
local prefix = ARGV[1]
local function text(value)
  if value == nil or value == cjson.null then return '' end
  return tostring(value)
end
local function fields(raw)
  local ok, view
  if string.byte(raw, 1) == 123 then
    ok, view = pcall(cjson.decode, raw)
  else
    ok, view = pcall(cmsgpack.unpack, raw)
  end
  if not ok or type(view) ~= 'table' then return nil end
  if view[1] == """
    + str(VIEW_FORMAT)
    + """ then
    return {namespace = view[2], name = view[3], node = view[5], binding = view[7],
            verdict = view[9]}
  end
  return view
end
for i = 3, #ARGV do
  local uid = ARGV[i]
  local raw = redis.call('hget', KEYS[1], uid)
  if raw then
    local view = fields(raw)
    if view then
      redis.call('zrem', prefix .. 'verdict:' .. text(view.verdict), uid)
      redis.call('zrem', prefix .. 'ns:' .. text(view.namespace), uid)
      redis.call('zrem', prefix .. 'node:' .. text(view.node), uid)
      redis.call('zrem', prefix .. 'binding:' .. text(view.binding), uid)
      redis.call('zrem', KEYS[3], text(view.namespace) .. '/' .. text(view.name) .. '\\n' .. uid)
    end
    redis.call('hdel', KEYS[1], uid)
  end
  redis.call('zadd', KEYS[4], ms, uid)
end
redis.call('zremrangebyrank', KEYS[4], 0, -tonumber(ARGV[2]) - 1)
return ms
"""
)
REMOVED_KEPT = 10_000  # removals remembered for resuming clients; older ones mean "reload"
# Indexed bindings a pod can leave (static is static from its first sight).
_BINDINGS_LEFT = ("", "unknown", "manual")


def write_pods(
    pipe: redis.client.Pipeline,
    cluster: str,
    views: dict[str, tuple[dict[str, Any], float]],
    previous: dict[str, tuple[str, str, str]],
) -> None:
    """Store pod views and their index entries. ``previous`` (uid -> verdict, namespace,
    node as last written by this writer; empty after a restore, which clears the indexes)
    is updated in place. One command per index key touched, not per pod: a burst moves
    thousands of pods between a few indexes. Scores are ``rank_score``s, rewritten on every
    write since a verdict change moves the pod in every index."""
    if not views:
        return
    blobs = {}
    # Keyed by (index, value) while collecting: the key names are made once per batch.
    adds: dict[tuple[str, str], dict[str, float]] = {}
    removes: dict[tuple[str, str], list[str]] = {}
    members = []
    for uid, (view, _last_change) in views.items():
        blobs[uid] = encode_view(view)
        verdict, namespace, node = now = (view["verdict"], view["namespace"], view["node"] or "")
        binding = view.get("binding") or ""
        score = rank_score(verdict, view["milestones"].get("created"))
        before = previous.get(uid)
        if before is not None:
            if before != now:
                for by, old, new in zip(INDEXES, before, now, strict=True):
                    if old != new:
                        removes.setdefault((by, old), []).append(uid)
            if binding != "static":
                for other in _BINDINGS_LEFT:
                    if other != binding:
                        removes.setdefault((BINDING, other), []).append(uid)
        adds.setdefault(("verdict", verdict), {})[uid] = score
        adds.setdefault(("ns", namespace), {})[uid] = score
        adds.setdefault(("node", node), {})[uid] = score
        if binding in INDEXED_BINDINGS:
            adds.setdefault((BINDING, binding), {})[uid] = score
        members.append(f"{namespace}/{view['name']}{NAME_SEPARATOR}{uid}")
        previous[uid] = now
    for (by, value), uids in removes.items():
        pipe.zrem(index_key(cluster, by, value), *uids)
    for (by, value), scored in adds.items():
        pipe.zadd(index_key(cluster, by, value), scored)
    pipe.hset(pods_key(cluster), mapping=blobs)
    pipe.eval(_CHANGED, 2, fold_key(cluster), changed_key(cluster), *members)


def drop_pods(
    pipe: redis.client.Pipeline,
    cluster: str,
    uids: Iterable[str],
    previous: dict[str, tuple[str, str, str]],
) -> None:
    """Remove pods with their index entries, and log the removals for resuming clients."""
    uids = list(uids)
    for uid in uids:
        previous.pop(uid, None)
    keys = (pods_key(cluster), fold_key(cluster), changed_key(cluster), removed_key(cluster))
    prefix = index_key(cluster, "", "")[:-1]
    for start in range(0, len(uids), 1000):
        chunk = uids[start : start + 1000]
        pipe.eval(_DROP, 4, *keys, prefix, REMOVED_KEPT, *chunk)


def pod_views(client: redis.Redis, cluster: str) -> dict[str, dict[str, Any]]:
    return {
        uid.decode(): decode_view(raw) for uid, raw in client.hgetall(pods_key(cluster)).items()
    }


def pods_by(client: redis.Redis, cluster: str, by: str, value: str) -> list[str]:
    """Pod uids in an index (verdict, ns, node or binding), worst first then oldest first."""
    return [uid.decode() for uid in client.zrange(index_key(cluster, by, value), 0, -1)]


def fold_state(client: redis.Redis, cluster: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in client.hgetall(fold_key(cluster)).items()}
