"""Pages of pods: filtered, in triage order, from a keyset cursor (``/api/.../pods``, the
board, the exports).

The indexes (``handoff/live/store.py``) are zsets scored by ``store.rank_score``, so one verdict
is one score range and ascending score is the triage order. A page walks the most selective
index that applies (the verdict indexes, or the namespace, node or binding index) in that
order from a keyset cursor, checks the other filters with ZMSCORE, and reads only the views
it returns. Nothing here loads or scans every pod of a cluster: free-text search reads
the fold's trigram index (``live/search``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from handoff.core import verdicts as v
from handoff.core.viewcodec import decode_view
from handoff.live import search, store

MAX_LIMIT = 500
MAX_Q = 200
CHUNK = 1000  # index entries read per round trip while walking
DIRECT = 4000  # name-search candidates ordered directly; more: the triage order is walked
READ_MAX = 16_000  # names every trigram of a search is in, above which no posting is read first
WALK_MAX = 20_000  # pods a name search walks before it orders its candidates instead
SHORT_Q = f"q needs at least {search.GRAM} characters (shorter text would match most pods)"


class QueryError(ValueError):
    """A filter or cursor the API must refuse (HTTP 400), with a message that says why."""


@dataclass(frozen=True)
class PodFilter:
    verdicts: tuple[str, ...] = ()  # empty: every verdict
    namespace: str = ""
    node: str | None = None  # "" is "not bound to a node"
    binding: str = ""
    q: str = ""

    def __post_init__(self) -> None:
        unknown = [name for name in self.verdicts if name not in v.VERDICTS]
        if unknown:
            raise QueryError(f"unknown verdict {unknown[0]!r}")
        if self.binding and self.binding not in v.BINDINGS:
            raise QueryError(f"binding must be one of {', '.join(v.BINDINGS)}")
        if len(self.q) > MAX_Q:
            raise QueryError(f"q is longer than {MAX_Q} characters")
        if not self.q.isprintable():
            # Names are printable; dropping the rest would silently widen the search.
            raise QueryError("q must be printable text (no control characters)")
        if self.q and len(self.q.casefold()) < search.GRAM:
            # The name index holds trigrams: shorter text could only be answered by a scan.
            raise QueryError(SHORT_Q)

    def ordered_verdicts(self) -> tuple[str, ...]:
        wanted = set(self.verdicts)
        return tuple(n for n in store.RANKED if not wanted or n in wanted)

    def matches(self, view: dict[str, Any]) -> bool:
        """The same test the queries make, for a view pushed live (the board uses it too)."""
        if self.verdicts and view["verdict"] not in self.verdicts:
            return False
        if self.namespace and view["namespace"] != self.namespace:
            return False
        if self.node is not None and (view["node"] or "") != self.node:
            return False
        if self.binding and view.get("binding") != self.binding:
            return False
        text = self.q.casefold()
        return not text or text in f"{view['namespace']}/{view['name']}".casefold()


@dataclass(frozen=True)
class Cursor:
    """Keyset position: the (score, uid) of the last pod of the previous page."""

    score: float
    uid: str

    def encode(self) -> str:
        return base64.urlsafe_b64encode(orjson.dumps([self.score, self.uid])).decode()

    @classmethod
    def decode(cls, text: str) -> Cursor:
        try:
            score, uid = orjson.loads(base64.urlsafe_b64decode(text.encode() + b"=="))
            if not isinstance(uid, str) or isinstance(score, bool):
                raise TypeError
            return cls(float(score), uid)
        except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError) as exc:
            raise QueryError("cursor is not one this API returned") from exc


@dataclass
class Page:
    pods: list[dict[str, Any]]
    next: Cursor | None
    total: int | None  # exact count of matches when one index answers it, else None


def pods_page(
    client: redis.Redis,
    cluster: str,
    flt: PodFilter,
    after: Cursor | None = None,
    limit: int = 100,
) -> Page:
    """One page of pods matching ``flt`` in triage order, after ``after``."""
    limit = max(1, min(limit, MAX_LIMIT))
    if flt.q:
        picked, more = _search(client, cluster, flt, after, limit)
        total = None
    else:
        sizes = _index_sizes(client, cluster, flt)
        picked, more = _walk(client, cluster, flt, after, limit, sizes=sizes) or ([], False)
        total = _total(client, cluster, flt, sizes)
    found = views(client, cluster, [uid for _, uid in picked])
    pods = [found[uid] for _, uid in picked if uid in found]
    last = picked[-1] if picked and more else None
    return Page(pods, Cursor(*last) if last else None, total)


@dataclass(frozen=True)
class _Sets:
    """Index keys a pod must be in (besides its verdict's), and keys it must not be in."""

    within: list[str]
    outside: list[str]

    def __bool__(self) -> bool:
        return bool(self.within or self.outside)


def _filters(cluster: str, flt: PodFilter) -> _Sets:
    within, outside = [], []
    if flt.namespace:
        within.append(store.index_key(cluster, "ns", flt.namespace))
    if flt.node is not None:
        within.append(store.index_key(cluster, "node", flt.node))
    if flt.binding == "scheduler":  # not indexed: in none of the indexed bindings
        outside = [store.index_key(cluster, store.BINDING, b) for b in store.INDEXED_BINDINGS]
    elif flt.binding:
        within.append(store.index_key(cluster, store.BINDING, flt.binding))
    return _Sets(within, outside)


def _walk(
    client: redis.Redis,
    cluster: str,
    flt: PodFilter,
    after: Cursor | None,
    limit: int,
    text: str | None = None,
    sizes: list[int] | None = None,
) -> tuple[list[tuple[float, str]], bool] | None:
    """The page in triage order from the indexes. With ``text`` (a name search, case-
    folded) only the pods whose indexed name holds it; then the walk gives up (None)
    after WALK_MAX pods examined, or sooner when at the rate found so far the page would
    not be full by then. ``sizes``: ``_index_sizes``, when already read."""
    verdicts = flt.ordered_verdicts()
    sets = _filters(cluster, flt)
    verdict_keys = [store.index_key(cluster, "verdict", name) for name in verdicts]
    sizes = _index_sizes(client, cluster, flt) if sizes is None else sizes
    by_verdict = sum(sizes[: len(verdict_keys)])
    # Walk the smallest index that applies; check the others per chunk.
    driver = None
    if sets.within:
        smallest = min(range(len(sets.within)), key=lambda i: sizes[len(verdict_keys) + i])
        if sizes[len(verdict_keys) + smallest] < by_verdict:
            driver = sets.within[smallest]
    checks = _Sets([key for key in sets.within if key != driver], sets.outside)
    size = CHUNK if checks or text is not None else limit + 1
    found: list[tuple[float, str]] = []
    examined = 0
    for key, name, count in zip(verdict_keys, verdicts, sizes[: len(verdict_keys)], strict=True):
        low, high = store.verdict_range(name)
        if (after is not None and after.score >= high) or (driver is None and not count):
            continue  # nothing of it after the cursor, or (walking it) an empty index
        walked = driver or key
        if text is None:
            chunks = _kept(client, _ranged(client, walked, low, high, after, size), checks)
        else:
            chunks = _named(client, cluster, (walked, low, high, size), after, checks, text)
        for read, kept in chunks:
            found.extend(kept)
            if len(found) > limit:
                return found[:limit], True
            examined += read
            if text is not None and _hopeless(len(found), examined, limit):
                return None
    return found, False


def _index_sizes(client: redis.Redis, cluster: str, flt: PodFilter) -> list[int]:
    """The size of each verdict's index the filter walks (``ordered_verdicts``' order),
    then of each index its pods must be in: one round trip."""
    sets = _filters(cluster, flt)
    pipe = client.pipeline(transaction=False)
    for name in flt.ordered_verdicts():
        pipe.zcard(store.index_key(cluster, "verdict", name))
    for key in sets.within:
        pipe.zcard(key)
    return pipe.execute()


def _hopeless(found: int, examined: int, limit: int) -> bool:
    """A name search's walk should stop: WALK_MAX pods examined, or matches so sparse
    that at their rate the page would not be full within WALK_MAX (a text whose trigrams
    are each common but rare together: its candidates are few, and ordering them is
    cheaper than walking)."""
    if examined >= WALK_MAX:
        return True
    # A rate needs a sample: the first verdicts' indexes may hold a handful of pods, and
    # the matches may all come after them (the scale trace's 150,000 first pods share a
    # verdict and a score, behind its churn's few hundred failing or starting ones).
    return examined >= CHUNK and found * WALK_MAX < (limit + 1) * examined


def _ranged(
    client: redis.Redis, key: str, low: float, high: float, after: Cursor | None, size: int
) -> Iterator[list[tuple[float, str]]]:
    """(score, uid) of ``key`` in [low, high) after the cursor, in order, chunk by chunk.
    Each chunk starts where the last ended by rank (``_AFTER``), so pods sharing a score
    (creation times are whole seconds: a scale-up creates hundreds in one) cost a page
    what any page costs, never a read of every pod of that score."""
    cursor = _start(after, low, high)
    while True:
        reply = client.eval(_AFTER, 1, key, repr(low), repr(high), size, *cursor)
        rows = [(float(reply[i + 1]), reply[i].decode()) for i in range(0, len(reply), 2)]
        if not rows:
            return
        yield rows
        if len(rows) < size:
            return
        cursor = [repr(rows[-1][0]), rows[-1][1]]


def _start(after: Cursor | None, low: float, high: float) -> list[str]:
    """The cursor's arguments to ``_AFTER`` and ``_NAMED``: none when it is not in
    [low, high) (the walk starts at ``low``)."""
    return [repr(after.score), after.uid] if after is not None and low <= after.score < high else []


# Lua: the rank of the first member of ``key`` in [low, high) after a cursor (its score
# and uid, or nil: from ``low``) and the rank ``size`` members later, at most ``high``; in
# the zset's own order (score, then member bytes). The cursor's score ties are ranks
# [ZCOUNT < score, ZCOUNT <= score), searched in halves for the first member after the
# cursor's uid (compared byte by byte as Redis orders members; Lua's own comparison follows
# the server's collation locale). A cursor whose pod has gone or moved since is found all
# the same.
_SPAN = """
local function after(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
local function span(key, low, high, size, score, uid)
  local first
  if score then
    local lo = redis.call('ZCOUNT', key, '-inf', '(' .. score)
    local hi = redis.call('ZCOUNT', key, '-inf', score)
    while lo < hi do
      local mid = math.floor((lo + hi) / 2)
      if after(redis.call('ZRANGE', key, mid, mid)[1], uid) then hi = mid else lo = mid + 1 end
    end
    first = lo
  else
    first = redis.call('ZCOUNT', key, '-inf', '(' .. low)
  end
  return first, math.min(redis.call('ZCOUNT', key, '-inf', '(' .. high), first + size)
end
"""

# KEYS[1] an index; ARGV low, high (excluded), size, and a cursor's score and uid or none.
# Up to ``size`` members and scores from ``low`` or after the cursor, below ``high``.
_AFTER = (
    _SPAN
    + """
local first, stop = span(KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5])
if first >= stop then return {} end
return redis.call('ZRANGE', KEYS[1], first, stop - 1, 'WITHSCORES')
"""
)

# KEYS[1] an index, KEYS[2] the name index's names hash (uid -> "<ordinal>\t<folded
# namespace/name>", ``search.names_key``), then the keys a pod must be in, then those it
# must not be in. ARGV low, high (excluded), size, the folded text, how many keys it must
# be in, and a cursor's score and uid or none. The ``size`` members after the cursor as
# ``_AFTER`` reads them, checked here: how many were read, the last one's uid and score
# (the next cursor), then the uid and score of each in the keys it must be in, in none of
# the others, whose name holds the text (a plain find: no Lua pattern).
_NAMED = (
    _SPAN
    + """
local key, names, text, within = KEYS[1], KEYS[2], ARGV[4], tonumber(ARGV[5])
local first, stop = span(key, ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[6], ARGV[7])
if first >= stop then return {0} end
local rows = redis.call('ZRANGE', key, first, stop - 1, 'WITHSCORES')
local out = {#rows / 2, rows[#rows - 1], rows[#rows]}
for i = 1, #rows, 2 do
  local uid, kept = rows[i], true
  for k = 3, #KEYS do
    if (redis.call('ZSCORE', KEYS[k], uid) ~= false) ~= (k < 3 + within) then
      kept = false
      break
    end
  end
  local entry = kept and redis.call('HGET', names, uid)
  if entry then
    local tab = string.find(entry, '\t', 1, true)
    if tab and string.find(entry, text, tab + 1, true) then
      out[#out + 1] = uid
      out[#out + 1] = rows[i + 1]
    end
  end
end
return out
"""
)


def _keep(
    client: redis.Redis, chunk: list[tuple[float, str]], checks: _Sets
) -> list[tuple[float, str]]:
    if not checks or not chunk:
        return chunk
    uids = [uid for _, uid in chunk]
    pipe = client.pipeline(transaction=False)
    for key in [*checks.within, *checks.outside]:
        pipe.zmscore(key, uids)
    replies = pipe.execute()
    within, outside = replies[: len(checks.within)], replies[len(checks.within) :]
    return [
        item
        for i, item in enumerate(chunk)
        if all(s[i] is not None for s in within) and all(s[i] is None for s in outside)
    ]


def _kept(
    client: redis.Redis, chunks: Iterator[list[tuple[float, str]]], checks: _Sets
) -> Iterator[tuple[int, list[tuple[float, str]]]]:
    """Per chunk, how many pods it read and those that pass ``checks``."""
    for chunk in chunks:
        yield len(chunk), _keep(client, chunk, checks)


def _search(
    client: redis.Redis, cluster: str, flt: PodFilter, after: Cursor | None, limit: int
) -> tuple[list[tuple[float, str]], bool]:
    """Free text from the fold's name index (``live/search``), never a scan. The rarest
    trigrams' postings give the candidates, unless every trigram of the text is in more
    than READ_MAX names (a namespace of a large cluster, a common word): reading and
    intersecting postings that large would cost more than a broad match needs. Many
    candidates, or none read: the triage order is walked and each chunk's names checked,
    which finds a page of a broad match in a few chunks. Few, or when the walk gives up:
    they are put in triage order by their rank scores, and only the best are resolved and
    their names checked until the page is full."""
    text = flt.q.casefold()
    try:
        sizes = search.posting_sizes(client, cluster, text)
    except search.SearchTooShort as exc:
        raise QueryError(SHORT_Q) from exc
    broad = min(sizes.values()) > READ_MAX
    found = None if broad else search.candidates(client, cluster, text, sizes)
    if found is None or len(found) > DIRECT:
        walked = _walk(client, cluster, flt, after, limit, text)
        if walked is not None:
            return walked
    if found is None:
        found = search.candidates(client, cluster, text, sizes)
    if not search.current(client, cluster):  # a store the fold has not rebuilt yet
        return _looked_up(client, cluster, flt, text, found, after, limit)
    return _ranked(client, cluster, flt, text, found, after, limit)


def _ranked(
    client: redis.Redis,
    cluster: str,
    flt: PodFilter,
    text: str,
    found: set[int],
    after: Cursor | None,
    limit: int,
) -> tuple[list[tuple[float, str]], bool]:
    """The candidates in triage order by their rank scores; resolved to the uids of
    those whose names hold ``text`` a chunk at a time, best first, until the page and
    one more are found. A chunk never splits a score, so ordering each by (score, uid)
    orders them all."""
    wanted = _verdict_scores(flt)
    least = after.score if after is not None else 0.0
    order = [item for item in search.ranked(client, cluster, found) if item[0] >= least]
    order = [item for item in order if wanted(item[0])]
    sets = _filters(cluster, flt)
    picked: list[tuple[float, str]] = []
    start, size = 0, limit + 1
    while start < len(order) and len(picked) <= limit:
        end = min(start + size, len(order))
        while end < len(order) and order[end][0] == order[end - 1][0]:
            end += 1
        chunk = order[start:end]
        named = search.resolve(client, cluster, [ordinal for _, ordinal in chunk], text)
        matched = sorted((score, named[o]) for score, o in chunk if o in named)
        if after is not None:
            matched = [item for item in matched if item > (after.score, after.uid)]
        picked.extend(_keep(client, matched, sets))
        start, size = end, size * 2
    return picked[:limit], len(picked) > limit


def _verdict_scores(flt: PodFilter) -> Callable[[float], bool]:
    """Whether a rank score is one of the filter's verdicts' (of a known verdict when the
    filter names none), as ``store.verdict_of_score`` tells."""
    wanted = set(flt.ordered_verdicts())
    if len(wanted) < len(store.RANKED):
        return lambda score: store.verdict_of_score(score) in wanted
    end = store.RANK_SPAN * len(store.RANKED)
    return lambda score: 0 <= score < end


def _looked_up(
    client: redis.Redis,
    cluster: str,
    flt: PodFilter,
    text: str,
    found: set[int],
    after: Cursor | None,
    limit: int,
) -> tuple[list[tuple[float, str]], bool]:
    """Every candidate resolved, with its score from its namespace's index, then
    ordered: what an index without rank shards (``search.VERSION`` 1) answers."""
    verdicts = set(flt.ordered_verdicts())
    candidates = [
        (score, uid)
        for uid, (name, score) in search.lookup(client, cluster, found).items()
        if text in name and score is not None and store.verdict_of_score(score) in verdicts
    ]
    scored = _keep(client, candidates, _filters(cluster, flt))
    scored.sort()
    if after is not None:
        scored = [item for item in scored if item > (after.score, after.uid)]
    return scored[:limit], len(scored) > limit


def _named(
    client: redis.Redis,
    cluster: str,
    span: tuple[str, float, float, int],
    after: Cursor | None,
    checks: _Sets,
    text: str,
) -> Iterator[tuple[int, list[tuple[float, str]]]]:
    """A name search's walk of one index over ``span`` (key, low, high, chunk size):
    per chunk, how many pods it read and those that pass ``checks`` and whose indexed
    name holds ``text`` (such a name holds every trigram of it, so no candidate set is
    needed). Redis checks them (``_NAMED``): only the matches come back."""
    key, low, high, size = span
    keys = [key, search.names_key(cluster), *checks.within, *checks.outside]
    cursor = _start(after, low, high)
    while True:
        reply = client.eval(
            _NAMED, len(keys), *keys, repr(low), repr(high), size, text, len(checks.within), *cursor
        )
        if not reply[0]:
            return
        yield reply[0], [(float(reply[i + 1]), reply[i].decode()) for i in range(3, len(reply), 2)]
        if reply[0] < size:
            return
        cursor = [repr(float(reply[2])), reply[1].decode()]


def _total(client: redis.Redis, cluster: str, flt: PodFilter, sizes: list[int]) -> int | None:
    """Exact count of matches when the indexes give it without walking, else None. Without
    other filters than verdicts it is the sum of their indexes' ``sizes``
    (``_index_sizes``)."""
    sets = _filters(cluster, flt)
    if flt.q or len(sets.within) + bool(sets.outside) > 1:
        return None
    if not sets.within and not sets.outside:
        return sum(sizes[: len(flt.ordered_verdicts())])
    pipe = client.pipeline(transaction=False)
    for name in flt.ordered_verdicts():
        low, high = store.verdict_range(name)
        pipe.zcard(store.index_key(cluster, "verdict", name))
        for key in sets.within + sets.outside:
            pipe.zcount(key, low, f"({high!r}")
    replies = pipe.execute()
    step = 1 + len(sets.within) + len(sets.outside)
    total = 0
    for start in range(0, len(replies), step):
        everyone, *parts = replies[start : start + step]
        total += parts[0] if sets.within else everyone - sum(parts)
    return total


def views(client: redis.Redis, cluster: str, uids: list[str]) -> dict[str, dict[str, Any]]:
    """The stored views of these pods (those still stored), decoded."""
    if not uids:
        return {}
    raws = client.hmget(store.pods_key(cluster), uids)
    return {uid: decode_view(raw) for uid, raw in zip(uids, raws, strict=True) if raw}
