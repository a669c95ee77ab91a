"""Redis layout of the live ingestion: one place for every key and every write.

Every key of a cluster carries the cluster's name in braces (``handoff:{prod}:events``):
a Redis Cluster hash tag, so one cluster's keys live in one slot and the scripts and
pipelines below stay single-slot. docs/architecture.md ("Redis layout") describes them.

Writes are idempotent: stream entries are folded by a deterministic, idempotent timeline,
pod views are overwritten whole, index updates are set operations. At-least-once delivery
anywhere on the path changes nothing.

The store moves bytes: a pod view arrives encoded (``handoff.core.viewcodec``, by the
fold) and leaves encoded (the read side, ``live/queries``, decodes it). The registry of
clusters is ``live/clusters.py``, leases are ``live/leases.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import orjson
import redis

from handoff.core import verdicts as v
from handoff.core.trace import parse_time
from handoff.core.viewcodec import LUA_POSITIONS, VIEW_FORMAT, index_fields

STREAM_FIELD = b"l"  # the one field of a stream entry: a trace v1 line


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


def node_verdicts_key(cluster: str) -> str:
    """Hash "<node>\n<verdict>" -> pods of that verdict handed to that node, kept by
    ``write_pods``/``drop_pods``: the nodes page reads it instead of every view. A
    restore that clears the indexes clears it with them (``Folder._clear_indexes``)."""
    return k(cluster, "handed")


def namespaces_key(cluster: str) -> str:
    """Hash namespace -> pods stored in it, kept by ``write_pods``/``drop_pods`` (a
    namespace goes with its last pod): /metrics lists the namespaces holding pods from it
    instead of scanning the keyspace for their indexes. A namespace never changes for a
    pod, so only a pod's first write and its drop count."""
    return k(cluster, "namespaces")


def owners_key(cluster: str) -> str:
    """Hash "<kind>/<namespace>/<name>" -> JSON of an owner that needs attention (its
    controller failing to create pods, its pods looping: ``OwnerBook.record``), written by
    the fold: one field per such owner, none per pod."""
    return k(cluster, "owners")


def write_owners(
    pipe: redis.client.Pipeline, cluster: str, records: dict[str, bytes | None]
) -> None:
    """Store owner records; None removes one (nothing about it needs attention now)."""
    put = {key: raw for key, raw in records.items() if raw is not None}
    gone = [key for key, raw in records.items() if raw is None]
    if put:
        pipe.hset(owners_key(cluster), mapping=put)
    if gone:
        pipe.hdel(owners_key(cluster), *gone)


def owner_records(client: redis.Redis, cluster: str) -> list[bytes]:
    return list(client.hvals(owners_key(cluster)))


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
    start = after_cursor(after)
    while True:
        entries = client.xrange(key, min=start, max="+", count=batch)
        if not entries:
            return
        for entry_id, fields in entries:
            yield entry_id.decode(), fields[STREAM_FIELD]
        start = "(" + entries[-1][0].decode()


def after_cursor(cursor: str) -> str:
    """XRANGE's start for the entries after a fold's ``cursor`` ("0-0": from the first)."""
    return "-" if cursor == "0-0" else "(" + cursor


def first_unfolded(client: redis.Redis | redis.client.Pipeline, cluster: str, cursor: str) -> Any:
    """The oldest entry after ``cursor`` (queued, on a pipeline): for ``unfolded_age``."""
    return client.xrange(events_key(cluster), min=after_cursor(cursor), count=1)


def unfolded_age(first: list, now: float) -> float:
    """How long the entry ``first_unfolded`` found has waited (Redis stamps the ids); 0
    when there is none: the fold is caught up."""
    if not first:
        return 0.0
    return max(0.0, now - stream_id_key(first[0][0])[0] / 1000)


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
    return decoded(client.hgetall(stream_key(cluster, stream)))


def decoded(raw: dict[bytes, bytes]) -> dict[str, str]:
    """A hash as Redis answers it, as text."""
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

# Counts (pods handed per node and verdict; pods per namespace): ARGV field, change
# pairs; a count that reaches zero goes, so the hash holds only what has pods.
_COUNT = """
for i = 1, #ARGV, 2 do
  if redis.call('hincrby', KEYS[1], ARGV[i], ARGV[i + 1]) <= 0 then
    redis.call('hdel', KEYS[1], ARGV[i])
  end
end
"""

# Dropping reads each view to find its index entries, so it needs no caller-side memory
# (a fold worker that just restored has none). It reads both stored forms: the compact
# MessagePack array (``viewcodec.encode_view``: its index fields where
# ``viewcodec.LUA_POSITIONS`` says), a MessagePack map, and the JSON of older versions.
# ARGV: index key prefix, removal log cap, uids.
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
    return {"""
    + ", ".join(f"{name} = view[{place}]" for name, place in LUA_POSITIONS.items())
    + """}
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
      if text(view.node) ~= '' then
        local field = text(view.node) .. '\\n' .. text(view.verdict)
        if redis.call('hincrby', KEYS[5], field, -1) <= 0 then
          redis.call('hdel', KEYS[5], field)
        end
      end
      if redis.call('hincrby', KEYS[6], text(view.namespace), -1) <= 0 then
        redis.call('hdel', KEYS[6], text(view.namespace))
      end
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
    views: dict[str, tuple[dict[str, Any], bytes]],
    previous: dict[str, tuple[str, str, str]],
) -> None:
    """Store pod views and their index entries. ``views``: uid -> (view, its stored form
    from ``viewcodec.encode_view``); the view gives the index fields. ``previous`` (uid ->
    verdict, namespace, node as last written by this writer; empty after a restore, which
    clears the indexes) is updated in place. One command per index key touched, not per
    pod: a burst moves thousands of pods between a few indexes. Scores are
    ``rank_score``s, rewritten on every write since a verdict change moves the pod in
    every index."""
    if not views:
        return
    blobs = {}
    # Keyed by (index, value) while collecting: the key names are made once per batch.
    adds: dict[tuple[str, str], dict[str, float]] = {}
    removes: dict[tuple[str, str], list[str]] = {}
    members = []
    handed: dict[str, int] = {}  # node_verdicts_key fields -> change
    arrived: dict[str, int] = {}  # namespace -> pods written for the first time
    for uid, (view, blob) in views.items():
        blobs[uid] = blob
        verdict, namespace, node = now = (view["verdict"], view["namespace"], view["node"] or "")
        binding = view.get("binding") or ""
        score = rank_score(verdict, view["milestones"].get("created"))
        before = previous.get(uid)
        if before is None or before[0] != verdict or before[2] != node:
            _count_handed(handed, before, verdict, node)
        if before is None:
            arrived[namespace] = arrived.get(namespace, 0) + 1
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
    moved = [x for field, change in handed.items() if change for x in (field, change)]
    if moved:
        pipe.eval(_COUNT, 1, node_verdicts_key(cluster), *moved)
    if arrived:
        pipe.eval(
            _COUNT, 1, namespaces_key(cluster), *(x for pair in arrived.items() for x in pair)
        )
    pipe.eval(_CHANGED, 2, fold_key(cluster), changed_key(cluster), *members)


def _count_handed(
    handed: dict[str, int], before: tuple[str, str, str] | None, verdict: str, node: str
) -> None:
    """A pod moved from (before's verdict, node) to (verdict, node): pods on no node
    ("") are handed to none."""
    if before is not None and before[2]:
        field = f"{before[2]}{NAME_SEPARATOR}{before[0]}"
        handed[field] = handed.get(field, 0) - 1
    if node:
        field = f"{node}{NAME_SEPARATOR}{verdict}"
        handed[field] = handed.get(field, 0) + 1


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
    keys = (
        pods_key(cluster),
        fold_key(cluster),
        changed_key(cluster),
        removed_key(cluster),
        node_verdicts_key(cluster),
        namespaces_key(cluster),
    )
    prefix = index_key(cluster, "", "")[:-1]
    for start in range(0, len(uids), 1000):
        chunk = uids[start : start + 1000]
        pipe.eval(_DROP, len(keys), *keys, prefix, REMOVED_KEPT, *chunk)


def pod_blobs(client: redis.Redis, cluster: str) -> dict[str, bytes]:
    """Every stored view, encoded (``viewcodec.decode_view`` reads them)."""
    return {uid.decode(): raw for uid, raw in client.hgetall(pods_key(cluster)).items()}


def written_fields(
    client: redis.Redis, cluster: str, uids: Iterable[str], chunk: int = 2000
) -> dict[str, tuple[str, str, str]]:
    """(verdict, namespace, node) each stored view's index entries were written from, for
    the ``uids`` that have one: a restoring fold learns what it must move them from."""
    uids = list(uids)
    found: dict[str, tuple[str, str, str]] = {}
    for start in range(0, len(uids), chunk):
        part = uids[start : start + chunk]
        for uid, raw in zip(part, client.hmget(pods_key(cluster), part), strict=True):
            if raw is not None:
                found[uid] = index_fields(raw)
    return found


def pods_by(client: redis.Redis, cluster: str, by: str, value: str) -> list[str]:
    """Pod uids in an index (verdict, ns, node or binding), worst first then oldest first."""
    return [uid.decode() for uid in client.zrange(index_key(cluster, by, value), 0, -1)]


def fold_state(client: redis.Redis, cluster: str, *fields: str) -> dict[str, str]:
    """The fold's progress hash, or only ``fields`` of it (those present): its
    ``nodes_json`` is every node's summary (hundreds of KB at 5,000 nodes), which most
    readers do not need on every request."""
    if fields:
        values = client.hmget(fold_key(cluster), fields)
        return {k: v.decode() for k, v in zip(fields, values, strict=True) if v is not None}
    return {k.decode(): v.decode() for k, v in client.hgetall(fold_key(cluster)).items()}


# ------------------------------------------------------------------ snapshots

# Saves a snapshot unless the one stored covers more of the stream: a save that finishes
# late (a background one, or a worker that lost its lease) never replaces a newer one,
# whose cursor the stream may already have been trimmed to.
SAVE_SNAPSHOT = """
local function newer(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am or not bm then return false end
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am > bm or (am == bm and as > bs)
end
local current = redis.call('hget', KEYS[2], 'snapshot')
if current and newer(current, ARGV[1]) then
  redis.call('del', KEYS[3])
  return 0
end
redis.call('rename', KEYS[3], KEYS[1])
redis.call('hset', KEYS[2], 'snapshot', ARGV[1])
return 1
"""
# The blob goes to Redis in pieces of this many bytes, one element of a list each (RPUSHes
# to a scratch key, renamed at the end). One SET of 100 MB would hold every other client up
# while Redis copies it; APPENDs to one string did too, less visibly: past 1 MB Redis grows
# a string by 1 MB at a time, so every other APPEND reallocated, and often copied, the whole
# string so far (15-35 ms stalls at 36,000 pods in the pages bench, growing with the store).
# A list's elements are never copied again.
SNAPSHOT_PIECE = 1 << 20
SCRATCH_TTL = 600  # seconds a scratch key of an interrupted save lingers


def scratch_key(cluster: str) -> str:
    """Where this process writes a snapshot before it replaces the stored one."""
    return f"{snapshot_key(cluster)}:saving:{os.getpid()}"


def snapshot_pieces(blob: bytes) -> Iterator[bytes]:
    """The blob in the pieces a stored snapshot's list holds (one, empty, for no bytes)."""
    view = memoryview(blob)
    for start in range(0, max(1, len(blob)), SNAPSHOT_PIECE):
        yield view[start : start + SNAPSHOT_PIECE].tobytes()


def save_snapshot(client: redis.Redis, cluster: str, blob: bytes, cursor: str) -> bool:
    """Store a snapshot covering the stream up to ``cursor``, unless a newer one is there."""
    scratch = scratch_key(cluster)
    client.delete(scratch)
    for piece in snapshot_pieces(blob):
        pipe = client.pipeline(transaction=False)
        pipe.rpush(scratch, piece)
        pipe.expire(scratch, SCRATCH_TTL)
        pipe.execute()
    keys = [snapshot_key(cluster), fold_key(cluster), scratch]
    return bool(client.eval(SAVE_SNAPSHOT, 3, *keys, cursor))


def load_snapshot(client: redis.Redis, cluster: str) -> bytes | None:
    """The stored snapshot's bytes; None without one. A list of pieces (from issue 19's
    fourth round on) is read in one LRANGE (atomic: never pieces of two saves); a store
    written before holds one string, read as it is until the next save replaces it. Not
    in a Lua script: Lua would copy every piece into its own strings and back, holding
    Redis for a second at 190 MB."""
    key = snapshot_key(cluster)
    try:
        pieces = client.lrange(key, 0, -1)
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        return client.get(key)
    return b"".join(pieces) if pieces else None
