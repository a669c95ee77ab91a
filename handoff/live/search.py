"""The name search index the fold keeps (issue 19.2): free text over ``namespace/name``
answered without a scan.

Each stored pod gets an ordinal (a uint32, never reused) the first time it is written.
Per trigram of its case-folded ``namespace/name`` the ordinal is appended to a Redis
string of packed little-endian uint32s (``gram_key``): ordinals only grow, so each
posting stays sorted, and a flush appends a batch to each trigram it touched. Beside
them: ``names_key`` (uid -> "<ordinal>\\t<folded namespace/name>"), ``ordinal_key``
shards of 128 (ordinal -> uid; small hashes Redis stores compactly) and ``rank_key``
shards of 1,024 (each ordinal's rank score, the triage order ``store.rank_score`` gives,
as a little-endian float64 at 8 x (ordinal mod 1,024)), rewritten when the pod's verdict
or creation time changes.

A query of three characters or more fetches the sizes of its trigrams' postings, the
smallest few postings, intersects them, reads the candidates' rank scores in one script
(``ranked``: a read per rank shard, not per candidate), and ``paging`` resolves only the
best-ranked candidates to uids (``resolve``: each name checked in Redis, only the
matches' uids sent back) until a page is full. A pod that leaves the store leaves
``names`` and its shard (and a rank shard whose ordinals are all gone goes too); its
ordinal stays in the postings until the fold compacts them (``compact``: a posting whose
dead entries reach a quarter of it is rewritten), and a candidate without a uid is no
pod. About 4 bytes per trigram, 120 bytes of names and 8 of rank per pod.

``version_key`` holds VERSION: a store whose index another layout wrote (an upgrade
keeping Redis's data) is rebuilt by the fold's restore (``present`` is false), and until
then queries order their candidates the old way (``lookup``), which that layout answers.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import Any

import redis

from handoff.live import store

GRAM = 3
VERSION = 2  # 2: the rank shards
SHARD_BITS = 7  # ordinals per ordinal_key shard: 128, within Redis's compact hash size
RANK_BITS = 10  # ordinals per rank_key shard: 1,024 scores, 8 KB
SLOT = 8  # bytes of one rank score
FETCHED = 3  # postings fetched at most per query: the smallest ones
# ... and only those at most SPREAD times the smallest: reading and intersecting a posting
# costs its size, and one much larger than the candidates removes few of them (a term's
# trigrams come together: every name in namespace load-013 also holds "-01", in 62,000
# names at 270,000 pods, against 6,700 for "013").
SPREAD = 8
# Candidates per lookup script call: Redis runs nothing else while a script runs, and a
# name search may resolve thousands (up to paging.DIRECT); the calls go in one pipeline,
# so other clients' commands run between them at no extra round trip.
SCRIPT_BATCH = 256
# Candidates per rank script call (``ranked``): under a microsecond each, so about 4 ms;
# 270,000 in one call (a broad text whose walk gave up) held Redis for 30-120 ms.
RANK_BATCH = 4096
COMPACT_AT = 64  # dead entries a posting must have (and a quarter of it) to be rewritten


class SearchTooShort(ValueError):
    """A query shorter than a trigram: the index cannot answer it without a scan."""


def gram_key(cluster: str, gram: str) -> str:
    return store.k(cluster, "sx", "t", gram)


def names_key(cluster: str) -> str:
    return store.k(cluster, "sx", "names")


def ordinal_key(cluster: str, ordinal: int) -> str:
    return store.k(cluster, "sx", "o", str(ordinal >> SHARD_BITS))


def next_key(cluster: str) -> str:
    return store.k(cluster, "sx", "next")


def rank_key(cluster: str, ordinal: int) -> str:
    return store.k(cluster, "sx", "r", str(ordinal >> RANK_BITS))


def version_key(cluster: str) -> str:
    return store.k(cluster, "sx", "version")


def current(client: redis.Redis, cluster: str) -> bool:
    """The stored index has this module's layout (the rank shards among it)."""
    return client.get(version_key(cluster)) == str(VERSION).encode()


def fold(namespace: str, name: str) -> str:
    """What the index holds of a pod's name: ``namespace/name`` case-folded."""
    return f"{namespace}/{name}".casefold()


def trigrams(text: str) -> set[str]:
    return {text[i : i + GRAM] for i in range(len(text) - GRAM + 1)}


def _pack(ordinals: list[int]) -> bytes:
    packed = array("I", ordinals)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def _unpack(raw: bytes) -> array[int]:
    packed = array("I")
    packed.frombytes(raw[: len(raw) - len(raw) % packed.itemsize])
    if sys.byteorder != "little":
        packed.byteswap()
    return packed


# ---------------------------------------------------------------- the fold's side

# ARGV: the trigram keys' prefix, then (trigram, packed ordinals) pairs (the keys share
# the cluster's hash tag).
_APPEND = """
for i = 2, #ARGV, 2 do
  redis.call('append', ARGV[1] .. ARGV[i], ARGV[i + 1])
end
"""

# ARGV: the names hash, the rank shards' key prefix, then (uid, packed score) pairs: each
# indexed pod's slot rewritten (its ordinal from its names entry).
_RESCORE = """
for i = 3, #ARGV, 2 do
  local entry = redis.call('hget', ARGV[1], ARGV[i])
  if entry then
    local o = tonumber(string.match(entry, '^(%d+)'))
    redis.call('setrange', ARGV[2] .. math.floor(o / RANKED), (o % RANKED) * SLOT, ARGV[i + 1])
  end
end
""".replace("RANKED", str(1 << RANK_BITS)).replace("SLOT", str(SLOT))

# ARGV: the ordinal shards' prefix, the rank shards' prefix, then rank shard numbers: a
# rank shard whose ordinal shards are all gone (every pod of it left) is deleted.
_SWEEP = """
for i = 3, #ARGV do
  local r = tonumber(ARGV[i])
  local left = 0
  for s = r * PER, r * PER + PER - 1 do
    left = left + redis.call('exists', ARGV[1] .. s)
  end
  if left == 0 then
    redis.call('del', ARGV[2] .. r)
  end
end
""".replace("PER", str(1 << (RANK_BITS - SHARD_BITS)))


def _scores(scores: list[float]) -> bytes:
    packed = array("d", scores)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def _rank_of(view: dict[str, Any]) -> tuple[str, Any]:
    """What a pod's rank score is made of (``store.rank_score``'s arguments)."""
    return view["verdict"], view["milestones"].get("created")


class SearchIndex:
    """The fold's writer: ``queue`` a flush's new and removed pods into its pipeline
    (before ``store.write_pods``/``drop_pods`` update ``written``); ``compact`` now and
    then."""

    def __init__(self, client: redis.Redis, cluster: str) -> None:
        self.client = client
        self.cluster = cluster
        self.next: int | None = None  # the next ordinal (read from Redis once)
        self.dead: dict[str, set[int]] = {}  # trigram -> ordinals of pods gone
        # uid -> what its stored rank score was made of (_rank_of), as this writer wrote
        # it: a pod's slot is rewritten only when that changes (after a restart, once).
        self.ranks: dict[str, tuple[str, Any]] = {}

    def keys(self) -> list[str]:
        """Every key of the index (a restore that clears the indexes clears it)."""
        pattern = store.k(self.cluster, "sx", "*")
        return [key.decode() for key in self.client.scan_iter(match=pattern, count=1000)]

    def present(self) -> bool:
        """Kept for the stored pods in this layout (the version is written with the first
        pod indexed); else the restore rebuilds it."""
        return current(self.client, self.cluster)

    def forget(self) -> None:
        self.next, self.dead, self.ranks = 0, {}, {}

    def queue(
        self,
        pipe: redis.client.Pipeline,
        views: dict[str, tuple[dict[str, Any], bytes]],
        removed: Iterable[str],
        written: dict[str, tuple[str, str, str]],
    ) -> None:
        """Index the pods written for the first time; unindex the removed ones; rewrite
        the rank score of the others whose score changed. A uid's namespace/name never
        changes in Kubernetes; one whose namespace did (a test's writer, a hand-made
        trace) is indexed again."""
        new, moved, rescored = [], [], []
        for uid, (view, _) in views.items():
            before = written.get(uid)
            if before is None:
                new.append((uid, view))
            elif before[1] != view["namespace"]:
                moved.append((uid, view))
            elif self.ranks.get(uid) != _rank_of(view):
                rescored.append((uid, view))
        gone = [uid for uid in removed if uid in written and uid not in views]
        for uid in gone:
            self.ranks.pop(uid, None)
        if gone or moved:
            self._drop(pipe, gone + [uid for uid, _ in moved])
        if new or moved:
            self._add(pipe, new + moved)
        if rescored:
            self._rescore(pipe, rescored)

    def _add(self, pipe: redis.client.Pipeline, new: list[tuple[str, dict[str, Any]]]) -> None:
        if self.next is None:
            self.next = int(self.client.get(next_key(self.cluster)) or 0)
        names: dict[str, str] = {}
        shards: dict[str, dict[int, str]] = {}
        postings: dict[str, list[int]] = {}
        slots: dict[int, list[float]] = {}  # rank shard -> its new pods' scores, in order
        first = self.next
        for uid, view in new:
            ordinal = self.next
            self.next += 1
            text = fold(view["namespace"], view["name"])
            names[uid] = f"{ordinal}\t{text}"
            shards.setdefault(ordinal_key(self.cluster, ordinal), {})[ordinal] = uid
            for gram in trigrams(text):
                postings.setdefault(gram, []).append(ordinal)
            rank = self.ranks[uid] = _rank_of(view)
            slots.setdefault(ordinal >> RANK_BITS, []).append(store.rank_score(*rank))
        pipe.hset(names_key(self.cluster), mapping=names)
        for key, members in shards.items():
            pipe.hset(key, mapping={o & ((1 << SHARD_BITS) - 1): uid for o, uid in members.items()})
        args: list[Any] = []
        for gram, ordinals in postings.items():
            args += [gram, _pack(ordinals)]
        for start in range(0, len(args), 2000):  # one script call, not a command a trigram
            pipe.eval(_APPEND, 0, gram_key(self.cluster, ""), *args[start : start + 2000])
        ordinal = first  # new ordinals are consecutive: one SETRANGE per rank shard
        for shard, scores in slots.items():
            offset = (ordinal & ((1 << RANK_BITS) - 1)) * SLOT
            pipe.setrange(rank_key(self.cluster, ordinal), offset, _scores(scores))
            ordinal = (shard + 1) << RANK_BITS
        pipe.set(next_key(self.cluster), self.next)
        pipe.set(version_key(self.cluster), VERSION)

    def _rescore(self, pipe: redis.client.Pipeline, pods: list[tuple[str, dict[str, Any]]]) -> None:
        args: list[Any] = []
        for uid, view in pods:
            rank = self.ranks[uid] = _rank_of(view)
            args += [uid, _scores([store.rank_score(*rank)])]
        prefix = rank_key(self.cluster, 0)[:-1]
        for start in range(0, len(args), 2000):
            chunk = args[start : start + 2000]
            pipe.eval(_RESCORE, 0, names_key(self.cluster), prefix, *chunk)

    def _drop(self, pipe: redis.client.Pipeline, gone: list[str]) -> None:
        raws = self.client.hmget(names_key(self.cluster), gone)
        swept: set[int] = set()
        for raw in raws:
            if raw is None:
                continue
            number, _, text = raw.decode().partition("\t")
            ordinal = int(number)
            pipe.hdel(ordinal_key(self.cluster, ordinal), ordinal & ((1 << SHARD_BITS) - 1))
            swept.add(ordinal >> RANK_BITS)
            for gram in trigrams(text):
                self.dead.setdefault(gram, set()).add(ordinal)
        pipe.hdel(names_key(self.cluster), *gone)
        if swept:
            prefixes = ordinal_key(self.cluster, 0)[:-1], rank_key(self.cluster, 0)[:-1]
            pipe.eval(_SWEEP, 0, *prefixes, *sorted(swept))

    def compact(self) -> int:
        """Rewrite the postings whose dead entries reach COMPACT_AT and a quarter of
        them; returns the postings rewritten."""
        due = [gram for gram, dead in self.dead.items() if len(dead) >= COMPACT_AT]
        if not due:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for gram in due:
            pipe.strlen(gram_key(self.cluster, gram))
        sizes = pipe.execute()
        due = [g for g, size in zip(due, sizes, strict=True) if len(self.dead[g]) * 16 >= size]
        for gram in due:
            key = gram_key(self.cluster, gram)
            dead = self.dead.pop(gram)
            kept = [o for o in _unpack(self.client.get(key) or b"") if o not in dead]
            if kept:
                self.client.set(key, _pack(kept))
            else:
                self.client.delete(key)
        return len(due)


# ----------------------------------------------------------------- the read side


def posting_sizes(client: redis.Redis, cluster: str, text: str) -> dict[str, int]:
    """Ordinals in each trigram's posting of ``text`` (case-folded, at least GRAM
    characters), dead ones included: one round trip, no posting read. The smallest bounds
    the candidates; 0 means no pod's name holds ``text``."""
    grams = sorted(trigrams(text))
    if not grams:
        raise SearchTooShort(f"q needs at least {GRAM} characters")
    pipe = client.pipeline(transaction=False)
    for gram in grams:
        pipe.strlen(gram_key(cluster, gram))
    return {gram: size // 4 for gram, size in zip(grams, pipe.execute(), strict=True)}


def candidates(
    client: redis.Redis, cluster: str, text: str, sizes: dict[str, int] | None = None
) -> set[int]:
    """Ordinals of the pods whose folded name may contain ``text`` (case-folded, at
    least GRAM characters): the intersection of its rarest trigrams' postings (``sizes``:
    ``posting_sizes``, when the caller has them), within SPREAD of the rarest's size."""
    if sizes is None:
        sizes = posting_sizes(client, cluster, text)
    if min(sizes.values()) == 0:
        return set()
    rarest = sorted(sizes, key=lambda gram: (sizes[gram], gram))[:FETCHED]
    rarest = [gram for gram in rarest if sizes[gram] <= SPREAD * sizes[rarest[0]]]
    pipe = client.pipeline(transaction=False)
    for gram in rarest:
        pipe.get(gram_key(cluster, gram))
    found: set[int] | None = None
    for raw in pipe.execute():
        ordinals = _unpack(raw or b"")
        found = set(ordinals) if found is None else found.intersection(ordinals)
        if len(found) <= 64:
            break
    return found or set()


# KEYS[1]: the names hash. ARGV[1]: the ordinal shards' key prefix, ARGV[2]: the
# namespace indexes' key prefix, then ordinals. For each ordinal still a pod's: its uid,
# its names entry and its rank score (from its namespace's index: namespaces are
# lower-case, so the folded name starts with it), in one round trip. The keys share the
# cluster's hash tag, as the store's drop script's index keys do.
_LOOKUP = """
local out = {}
for i = 3, #ARGV do
  local o = tonumber(ARGV[i])
  local uid = redis.call('hget', ARGV[1] .. math.floor(o / SHARD), o % SHARD)
  if uid then
    local entry = redis.call('hget', KEYS[1], uid)
    if entry then
      local namespace = string.match(entry, '\t([^/]*)/') or ''
      out[#out + 1] = uid
      out[#out + 1] = entry
      out[#out + 1] = redis.call('zscore', ARGV[2] .. namespace, uid) or ''
    end
  end
end
return out
""".replace("SHARD", str(1 << SHARD_BITS))


def lookup(
    client: redis.Redis, cluster: str, ordinals: Iterable[int]
) -> dict[str, tuple[str, float | None]]:
    """uid -> (folded namespace/name, rank score or None) of the candidates that are
    still those pods (a uid whose entry names another ordinal is found by that one)."""
    ordinals = list(ordinals)
    if not ordinals:
        return {}
    prefix = ordinal_key(cluster, 0)[:-1]
    ns_prefix = store.index_key(cluster, "ns", "")
    reply = _batched(client, _LOOKUP, names_key(cluster), [prefix, ns_prefix], ordinals)
    out = {}
    wanted = set(ordinals)
    for i in range(0, len(reply), 3):
        number, _, text = reply[i + 1].decode().partition("\t")
        if int(number) in wanted:
            out[reply[i].decode()] = (text, float(reply[i + 2]) if reply[i + 2] else None)
    return out


# ARGV[1]: the rank shards' key prefix, ARGV[2]: the candidates' ordinals, packed
# little-endian uint32, ascending (so each rank shard is read once). Returns their rank
# scores, packed float64 in the same order; all bits set (a NaN) for an ordinal without one.
_RANKED = """
local prefix, packed = ARGV[1], ARGV[2]
local out, shard, blob = {}, -1, ''
for i = 1, #packed - 3, 4 do
  local o = struct.unpack('<I4', packed, i)
  local s = math.floor(o / RANKED)
  if s ~= shard then
    shard, blob = s, redis.call('get', prefix .. s) or ''
  end
  local at = (o % RANKED) * SLOT + 1
  local slot = string.sub(blob, at, at + SLOT - 1)
  if #slot < SLOT then slot = string.rep('\\255', SLOT) end
  out[#out + 1] = slot
end
return table.concat(out)
""".replace("RANKED", str(1 << RANK_BITS)).replace("SLOT", str(SLOT))


def ranked(client: redis.Redis, cluster: str, ordinals: Iterable[int]) -> list[tuple[float, int]]:
    """(rank score, ordinal) of the candidates, ascending: the triage order, read from
    the rank shards without resolving any candidate (RANK_BATCH a script call, in one
    round trip). An ordinal without a score (no pod) is left out."""
    ordered = sorted(ordinals)
    if not ordered:
        return []
    prefix = rank_key(cluster, 0)[:-1]
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(ordered), RANK_BATCH):
        pipe.eval(_RANKED, 0, prefix, _pack(ordered[start : start + RANK_BATCH]))
    scores = array("d")
    scores.frombytes(b"".join(pipe.execute()))
    if sys.byteorder != "little":
        scores.byteswap()
    pairs = [(score, o) for score, o in zip(scores, ordered, strict=True) if score == score]
    pairs.sort()
    return pairs


# KEYS[1]: the names hash. ARGV[1]: the ordinal shards' key prefix, ARGV[2]: a folded
# text, then ordinals. For each ordinal still that pod's (its names entry names it) whose
# folded name holds the text (a plain find: no Lua pattern): the ordinal and its uid;
# nothing for the others.
_RESOLVE = """
local text, out = ARGV[2], {}
for i = 3, #ARGV do
  local o = tonumber(ARGV[i])
  local uid = redis.call('hget', ARGV[1] .. math.floor(o / SHARD), o % SHARD)
  local entry = uid and redis.call('hget', KEYS[1], uid)
  if entry then
    local tab = string.find(entry, '\t', 1, true)
    local same = tab and string.sub(entry, 1, tab - 1) == ARGV[i]
    if same and string.find(entry, text, tab + 1, true) then
      out[#out + 1] = o
      out[#out + 1] = uid
    end
  end
end
return out
""".replace("SHARD", str(1 << SHARD_BITS))


def resolve(client: redis.Redis, cluster: str, ordinals: list[int], text: str) -> dict[int, str]:
    """ordinal -> uid of the ordinals that are still those pods (a uid whose entry names
    another ordinal is found by that one) and whose folded name holds ``text``: the names
    are checked in Redis, only the matches come back."""
    if not ordinals:
        return {}
    prefix = ordinal_key(cluster, 0)[:-1]
    reply = _batched(client, _RESOLVE, names_key(cluster), [prefix, text], ordinals)
    return {reply[i]: reply[i + 1].decode() for i in range(0, len(reply), 2)}


def _batched(
    client: redis.Redis, script: str, key: str, args: list[str], ordinals: list[int]
) -> list[Any]:
    """``script`` over the ordinals, SCRIPT_BATCH a call, in one round trip: the calls'
    replies joined (each ordinal's part of a reply stays within its call's)."""
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(ordinals), SCRIPT_BATCH):
        pipe.eval(script, 1, key, *args, *ordinals[start : start + SCRIPT_BATCH])
    return [item for reply in pipe.execute() for item in reply]


# KEYS[1]: the names hash. ARGV[1]: the trigram keys' prefix, ARGV[2]: the ordinal
# shards' prefix, ARGV[3]: the most ordinals the rarest posting may hold, ARGV[4]: the
# folded name, then its trigrams. The uids whose names entry is exactly that name, from
# the rarest trigrams' postings intersected here; false when the rarest posting holds more
# than ARGV[3] ordinals (the caller reads them itself: a script that long would hold Redis).
_NAMESAKES = """
local grams = {}
for i = 5, #ARGV do
  grams[#grams + 1] = {redis.call('strlen', ARGV[1] .. ARGV[i]), ARGV[i]}
end
table.sort(grams, function(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] end
  return a[2] < b[2]
end)
if grams[1][1] == 0 then return {} end
if grams[1][1] / 4 > tonumber(ARGV[3]) then return false end
local found, count
for k = 1, math.min(FETCHED, #grams) do
  local blob, kept, n = redis.call('get', ARGV[1] .. grams[k][2]), {}, 0
  for j = 1, #blob - 3, 4 do
    local o = struct.unpack('<I4', blob, j)
    if found == nil or found[o] then kept[o] = true; n = n + 1 end
  end
  found, count = kept, n
  if count <= 64 then break end
end
local out = {}
for o in pairs(found) do
  local uid = redis.call('hget', ARGV[2] .. math.floor(o / SHARD), o % SHARD)
  if uid and redis.call('hget', KEYS[1], uid) == string.format('%d', o) .. '\t' .. ARGV[4] then
    out[#out + 1] = uid
  end
end
return out
""".replace("SHARD", str(1 << SHARD_BITS)).replace("FETCHED", str(FETCHED))
NAMESAKES_MAX = 8192  # ordinals of the rarest posting the namesakes script reads at most


def namesakes(client: redis.Redis, cluster: str, text: str) -> list[str] | None:
    """The uids of the pods whose folded ``namespace/name`` is ``text``, in one round
    trip; None when the name's rarest trigram is in more than NAMESAKES_MAX names (then
    ``candidates`` and ``lookup`` answer, in three)."""
    prefixes = [gram_key(cluster, ""), ordinal_key(cluster, 0)[:-1]]
    grams = sorted(trigrams(text))
    if not grams:
        raise SearchTooShort(f"q needs at least {GRAM} characters")
    reply = client.eval(_NAMESAKES, 1, names_key(cluster), *prefixes, NAMESAKES_MAX, text, *grams)
    return None if reply is None else sorted(uid.decode() for uid in reply)
