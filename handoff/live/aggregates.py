"""What the fleet page needs, kept by the fold as it writes views (issue 19): duration
histograms per cluster and per node (``core/histogram``: fixed log buckets, mergeable,
≤ 4.9 % quantile error) and the swimlane's most recently created pods with their stage
bars. Sized by nodes, buckets and the swimlane's cap, never by pods; the page reads only
these (``queries.fleet_kept``), never every view.

Kept right the way the nodes page's counts are: each write moves a pod's part from its
old buckets to its new ones (a pod's figures change as milestones arrive, its node when
it is bound), each drop takes it off; a restore that clears the indexes clears these too
and counts every pod again. The fold remembers each pod's part (one integer,
``histogram.pack``); after a clean hand-over it reads a pod's old part from its stored
view the first time it moves. Verdict counts and pods per node are the indexes and
``handoff:{c}:handed`` (``store``); node readiness history is the fold's ``nodes_json``.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import redis

from handoff.core import histogram
from handoff.core.durations import not_observed
from handoff.core.trace import observed_time, parse_time
from handoff.core.verdicts import STAGES
from handoff.core.viewcodec import decode_view
from handoff.core.views import StageBar
from handoff.live import store

# The durations kept per node: what the fleet's latency heatmap colours by.
NODE_DURATIONS = ("bind_to_ack", "ack_to_running", "create_to_running")
LANE_CAP = 20_000  # the most recently created pods kept for the swimlane (its ``limit``'s most)
_LANE_BATCH = 1000  # pods per lane script call

_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode


def hist_key(cluster: str) -> str:
    """Hash "<duration>:<bucket>|z|u" -> pods (the cluster's histograms)."""
    return store.k(cluster, "hist")


def node_hist_key(cluster: str, node: str) -> str:
    """Hash "<duration>:<bucket>|z" -> pods handed to ``node`` (NODE_DURATIONS only)."""
    return store.k(cluster, "nodehist", node)


def recent_key(cluster: str) -> str:
    """Zset uid -> creation time (0: unknown) of the LANE_CAP newest pods."""
    return store.k(cluster, "recent")


def lanes_key(cluster: str) -> str:
    """Hash uid -> MessagePack [namespace, name, verdict, first start (epoch ms), [stage
    code, start, end, ...]] (ms after the first start): ``lane``."""
    return store.k(cluster, "lanes")


# ARGV: (key index, field, change) triples; a count that reaches zero goes.
_MOVE = """
for i = 1, #ARGV, 3 do
  local key = KEYS[tonumber(ARGV[i])]
  if redis.call('hincrby', key, ARGV[i + 1], ARGV[i + 2]) <= 0 then
    redis.call('hdel', key, ARGV[i + 1])
  end
end
"""

# KEYS: recent, lanes. ARGV: cap, then (uid, created, lane) triples. Keeps the ``cap``
# newest pods with their lanes; a member whose creation time moved earlier leaves (a
# refill finds what should take its place). Returns {pods kept, the oldest's time, or
# -inf while fewer than ``cap`` are kept}.
_LANES = """
local cap = tonumber(ARGV[1])
for i = 2, #ARGV, 3 do
  local uid, created = ARGV[i], tonumber(ARGV[i + 1])
  local current = redis.call('zscore', KEYS[1], uid)
  if current then
    if created < tonumber(current) then
      redis.call('zrem', KEYS[1], uid)
      redis.call('hdel', KEYS[2], uid)
    else
      redis.call('zadd', KEYS[1], created, uid)
      redis.call('hset', KEYS[2], uid, ARGV[i + 2])
    end
  elseif redis.call('zcard', KEYS[1]) < cap then
    redis.call('zadd', KEYS[1], created, uid)
    redis.call('hset', KEYS[2], uid, ARGV[i + 2])
  else
    local oldest = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
    if created > tonumber(oldest[2]) then
      redis.call('zadd', KEYS[1], created, uid)
      redis.call('hset', KEYS[2], uid, ARGV[i + 2])
      local out = redis.call('zpopmin', KEYS[1])
      redis.call('hdel', KEYS[2], out[1])
    end
  end
end
local card = redis.call('zcard', KEYS[1])
if card < cap then return {card, '-inf'} end
local oldest = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
return {card, oldest[2]}
"""


def part(view: dict[str, Any]) -> int:
    """A stored view's part in the histograms (``histogram.pack``)."""
    values = view.get("durations") or {}
    return histogram.pack(values, not_observed(view.get("milestones") or {}, values))


def _seconds(text: str) -> float:
    # The trace reader's parse (caches each second), as the exact fleet digest parses.
    value = observed_time(text)
    return value if value is not None else parse_time(text)


def created_of(view: dict[str, Any]) -> float:
    created = (view.get("milestones") or {}).get("created")
    return _seconds(created) if created else 0.0


def ms(text: str) -> int:
    """A stage bar's time as epoch milliseconds (what the swimlane draws)."""
    return round(_seconds(text) * 1000)


# Where each duration's code sits in a packed part (``histogram.pack``).
_MASK = (1 << histogram.BITS) - 1
_PLACES = tuple((place * histogram.BITS, name) for place, name in enumerate(histogram.NAMES))
_NODE_PLACES = tuple(item for item in _PLACES if item[1] in NODE_DURATIONS)
_STAGE_NAMES = tuple(stage.name for stage in STAGES)
_STAGE_CODE = {name: code for code, name in enumerate(_STAGE_NAMES)}


def lane(view: dict[str, Any]) -> bytes:
    """A pod's swimlane entry, compact (one per kept pod): [namespace, name, verdict,
    first start (epoch ms), [stage code, start, end, ...] in ms after that start]."""
    bars: list[Any] = []
    first = None
    for bar in view.get("stages") or []:
        start, end = ms(bar["start"]), ms(bar["end"])
        first = start if first is None else first
        bars += [_STAGE_CODE.get(bar["name"], bar["name"]), start - first, end - first]
    return _encode([view["namespace"], view["name"], view["verdict"], first or 0, bars])


def as_written(moment: float) -> float:
    """An instant as its view gives it back: ``format_time`` rounds it to the microsecond
    and ``observed_time`` reads that as the second plus the fraction. The same float,
    without the text (what ``lane`` and ``created_of`` parse)."""
    seconds = math.floor(moment)
    micros = round((moment - seconds) * 1_000_000)
    if micros == 1_000_000:
        seconds, micros = seconds + 1, 0
    return seconds + float(micros) / 1_000_000


def lane_of(
    view: dict[str, Any], stage_bars: list[StageBar], known: dict[float, int] | None = None
) -> bytes:
    """``lane(view)`` from the view's stage bars in epoch seconds (``views.stage_bars``),
    as the fold has them: the same bytes, no time parsed back. ``known``: instant -> its
    epoch ms, kept across the lanes of a flush (bars share their ends, pods their
    creation ticks, open bars the flush's ``now``)."""
    if known is None:
        known = {}
    flat: list[Any] = []
    for name, start, end, _open in stage_bars:
        start_ms = known.get(start)
        if start_ms is None:
            start_ms = known[start] = round(as_written(start) * 1000)
        end_ms = known.get(end)
        if end_ms is None:
            end_ms = known[end] = round(as_written(end) * 1000)
        flat += (_STAGE_CODE.get(name, name), start_ms, end_ms)
    first = flat[1] if flat else 0
    for i in range(1, len(flat), 3):
        flat[i] -= first
        flat[i + 1] -= first
    return _encode([view["namespace"], view["name"], view["verdict"], first, flat])


def read_lane(uid: str, raw: bytes) -> list[Any]:
    """[namespace, name, uid, verdict, [stage, start ms, end ms, ...]] of a kept entry."""
    namespace, name, verdict, first, bars = _decode(raw)
    for i in range(0, len(bars), 3):
        code = bars[i]
        bars[i] = _STAGE_NAMES[code] if isinstance(code, int) else code
        bars[i + 1] += first
        bars[i + 2] += first
    return [namespace, name, uid, verdict, bars]


class Aggregates:
    """The fold's side: queue each flush's moves (``queue``, before ``store.write_pods``
    and ``store.drop_pods`` update ``written``), then ``settle`` with the replies."""

    def __init__(self, client: redis.Redis, cluster: str, lane_cap: int = LANE_CAP) -> None:
        self.client = client
        self.cluster = cluster
        self.lane_cap = lane_cap
        self.parts: dict[str, int] = {}  # uid -> its part as counted in Redis
        self.oldest = float("-inf")  # creation time of the oldest kept lane, as last told
        self._replies: list[int] = []  # places of the lane script's replies in the pipeline
        self._dropped = False  # pods left the lane in the pipeline not settled yet

    def keys(self) -> list[str]:
        """Every key these aggregates write (a restore that clears the indexes clears them)."""
        pattern = node_hist_key(self.cluster, "*")
        nodes = [key.decode() for key in self.client.scan_iter(match=pattern, count=1000)]
        return [hist_key(self.cluster), recent_key(self.cluster), lanes_key(self.cluster), *nodes]

    def present(self) -> bool:
        """Kept for the stored pods (any stored pod is in the lane)."""
        return bool(self.client.exists(recent_key(self.cluster)))

    def forget(self) -> None:
        self.parts = {}
        self.oldest = float("-inf")

    def queue(
        self,
        pipe: redis.client.Pipeline,
        views: dict[str, tuple[dict[str, Any], bytes]],
        removed: Iterable[str],
        written: dict[str, tuple[str, str, str]],
        bars: Mapping[str, tuple[float | None, list[StageBar]]] | None = None,
    ) -> None:
        """Queue the moves of a flush: ``views`` written, ``removed`` dropped; ``written``
        is what was stored before (uid -> verdict, namespace, node). ``bars``: uid ->
        (creation time, ``views.stage_bars``) of views made by the caller, who has them in
        epoch seconds: their lanes are built from those instead of the view's text."""
        removed = [uid for uid in removed if uid not in views]
        self._recall([*views, *removed], written)
        moves: dict[tuple[str, str], int] = {}
        for uid, (view, _) in views.items():
            before = written.get(uid)
            new = part(view)
            old = self.parts.get(uid, 0) if before is not None else 0
            self._move(moves, old, new)
            old_node = before[2] if before is not None else ""
            node = view["node"] or ""
            if old != new or old_node != node:
                self._move_node(moves, old_node, old, -1)
                self._move_node(moves, node, new, 1)
            self.parts[uid] = new
        for uid in removed:
            before = written.get(uid)
            old = self.parts.pop(uid, 0)
            if before is not None:
                self._move(moves, old, 0)
                self._move_node(moves, before[2], old, -1)
        self._queue_moves(pipe, moves)
        if removed:  # before the lane script, whose reply then counts them out
            self._dropped = True
            pipe.zrem(recent_key(self.cluster), *removed)
            pipe.hdel(lanes_key(self.cluster), *removed)
        self._queue_lanes(pipe, views, bars or {})

    def _recall(self, uids: list[str], written: dict[str, tuple[str, str, str]]) -> None:
        """The parts of stored pods this worker has not counted itself (it restored after
        a clean hand-over): from their stored views, once."""
        missing = [uid for uid in uids if uid in written and uid not in self.parts]
        for start in range(0, len(missing), 2000):
            chunk = missing[start : start + 2000]
            raws = self.client.hmget(store.pods_key(self.cluster), chunk)
            for uid, raw in zip(chunk, raws, strict=True):
                self.parts[uid] = part(decode_view(raw)) if raw else 0

    @staticmethod
    def _move(moves: dict[tuple[str, str], int], old: int, new: int) -> None:
        """Move a pod's part in the cluster's histograms from ``old`` to ``new``."""
        if old == new:
            return
        for shift, name in _PLACES:
            before, after = old >> shift & _MASK, new >> shift & _MASK
            if before != after:
                if before:
                    key = ("", histogram.field(name, before))
                    moves[key] = moves.get(key, 0) - 1
                if after:
                    key = ("", histogram.field(name, after))
                    moves[key] = moves.get(key, 0) + 1

    @staticmethod
    def _move_node(moves: dict[tuple[str, str], int], node: str, packed: int, sign: int) -> None:
        """Add (sign 1) or take off (-1) a pod's figures in its node's histograms."""
        if not node or not packed:
            return
        for shift, name in _NODE_PLACES:
            code = packed >> shift & _MASK
            if code >= histogram.ZERO:
                key = (node, histogram.field(name, code))
                moves[key] = moves.get(key, 0) + sign

    def _queue_moves(self, pipe: redis.client.Pipeline, moves: dict[tuple[str, str], int]) -> None:
        keys: dict[str, int] = {}
        args: list[Any] = []
        for (node, field), change in moves.items():
            if change:
                key = node_hist_key(self.cluster, node) if node else hist_key(self.cluster)
                place = keys.setdefault(key, len(keys) + 1)
                args += [place, field, change]
        if args:
            pipe.eval(_MOVE, len(keys), *keys, *args)

    def _queue_lanes(
        self,
        pipe: redis.client.Pipeline,
        views: dict[str, tuple[dict[str, Any], bytes]],
        bars: Mapping[str, tuple[float | None, list[StageBar]]],
    ) -> None:
        """Offer the written pods to the swimlane: only the newest ``lane_cap`` of a
        batch can stay, and none older than the oldest kept once the lane is full."""
        oldest = self.oldest
        offered = []
        for uid, (view, _) in views.items():
            known = bars.get(uid)
            if known is None:
                created = created_of(view)
            else:
                created = 0.0 if known[0] is None else as_written(known[0])
            if created >= oldest:
                offered.append((created, uid, view))
        if len(offered) > self.lane_cap:
            offered = heapq.nlargest(self.lane_cap, offered, key=lambda item: item[:2])
        keys = (recent_key(self.cluster), lanes_key(self.cluster))
        instants: dict[float, int] = {}  # epoch ms of the instants met so far (lane_of)
        for start in range(0, len(offered), _LANE_BATCH):
            args: list[Any] = []
            for created, uid, view in offered[start : start + _LANE_BATCH]:
                known = bars.get(uid)
                entry = lane(view) if known is None else lane_of(view, known[1], instants)
                args += [uid, repr(created), entry]
            self._replies.append(len(pipe))
            pipe.eval(_LANES, 2, *keys, self.lane_cap, *args)

    def settle(self, replies: list[Any], stored: int) -> None:
        """After the pipeline ran: note the lane's oldest time; refill the lane when it
        holds fewer than it should (pods left it) from the indexes. ``stored``: pods
        stored now."""
        kept = None
        for place in self._replies:
            kept, oldest = replies[place]
            self.oldest = float(oldest)
        self._replies = []
        if kept is None:
            if not self._dropped:
                return
            kept = int(self.client.zcard(recent_key(self.cluster)))
        self._dropped = False
        if kept < min(self.lane_cap, stored):
            self.oldest = float("-inf")
            self.refill(min(self.lane_cap, stored) - int(kept))

    def refill(self, missing: int) -> None:
        """Offer the newest pods not in the lane again, read from their views: the
        verdict indexes are ordered by creation time within each verdict."""
        have = {uid.decode() for uid in self.client.zrange(recent_key(self.cluster), 0, -1)}
        candidates: list[tuple[float, str]] = []
        want = missing + len(have) + 16  # the newest overall may already be kept
        for verdict in store.RANKED:
            low, _ = store.verdict_range(verdict)
            key = store.index_key(self.cluster, "verdict", verdict)
            rows = self.client.zrevrangebyscore(
                key, f"({low + store.NOT_CREATED!r}", low, start=0, num=want, withscores=True
            )
            candidates += [(score - low, uid.decode()) for uid, score in rows]
            unknown = self.client.zrangebyscore(
                key, low + store.NOT_CREATED, low + store.NOT_CREATED, start=0, num=want
            )
            candidates += [(-1.0, uid.decode()) for uid in unknown]
        candidates.sort(reverse=True)
        chosen = [uid for _, uid in candidates if uid not in have][: missing + 16]
        if not chosen:
            return
        raws = self.client.hmget(store.pods_key(self.cluster), chosen)
        views = {uid: (decode_view(raw), raw) for uid, raw in zip(chosen, raws, strict=True) if raw}
        pipe = self.client.pipeline(transaction=False)
        self._queue_lanes(pipe, views, {})
        replies = pipe.execute()
        for place in self._replies:
            self.oldest = float(replies[place][1])
        self._replies = []
