"""The name index's rank shards (``search.VERSION`` 2): a search's pages equal a brute-force
filter over every stored view, ordered by each view's own rank score, for many random
terms on a few thousand pods, through every way of answering; through renames, verdict
changes, deletions and re-creations; and on a store whose index an older layout wrote
(answered the old way until the fold's restore rebuilds it)."""

from __future__ import annotations

import random
import string
from typing import Any

import pytest
import redis

from handoff.core import verdicts as v
from handoff.core.viewcodec import encode_view
from handoff.live import paging, queries, search, store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.paging import Cursor, PodFilter
from handoff.sim import Options, find_scenario, run
from tests.live.test_search_index import _check
from tests.webui.detail.tracedata import fold_into_redis
from tests.webui.pods import make_views, template

CLUSTER = "rk"
WORDS = ("api", "web", "cart", "pay", "straße", "ünïcödé", "Mail", "queue", "日本")


class Writer:
    """Writes views as the fold does: one SearchIndex kept across flushes (so a pod's
    slot is rewritten only when its rank changes), removals through ``drop_pods``."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.index = search.SearchIndex(client, CLUSTER)
        self.written: dict[str, tuple[str, str, str]] = {}

    def put(self, views: list[dict[str, Any]]) -> None:
        pipe = self.client.pipeline(transaction=True)
        chunk = {view["uid"]: (view, encode_view(view)) for view in views}
        self.index.queue(pipe, chunk, [], self.written)
        store.write_pods(pipe, CLUSTER, chunk, self.written)
        pipe.execute()

    def drop(self, uids: list[str]) -> None:
        pipe = self.client.pipeline(transaction=True)
        self.index.queue(pipe, {}, uids, self.written)
        store.drop_pods(pipe, CLUSTER, uids, self.written)
        pipe.execute()


def _named(base: dict[str, Any], count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    views = list(make_views(base, count, seed=seed).values())
    for view in views:
        words = rng.sample(WORDS, 2)
        suffix = "".join(rng.choices(string.ascii_lowercase + string.digits, k=5))
        view["namespace"] = f"team-{rng.choice(WORDS[:4])}-{rng.randrange(3)}"
        view["name"] = f"{words[0]}-{words[1]}-{suffix}"
    return views


def _terms(client: redis.Redis, rng: random.Random, count: int) -> list[str]:
    views = list(queries.all_views(client, CLUSTER))
    terms = ["no-such-pod-anywhere", "ÜNÏ", "STRASSE", "日本-", "zzz", "team-"]
    while len(terms) < count:
        view = rng.choice(views)
        text = f"{view['namespace']}/{view['name']}"
        start = rng.randrange(len(text) - 3)
        cut = text[start : start + rng.randint(3, 12)]
        terms += [cut, cut.upper(), view["namespace"], view["name"][: rng.randint(3, 9)]]
    return terms


def _pages(client: redis.Redis, flt: PodFilter, limit: int) -> list[str]:
    seen, cursor = [], None
    while True:
        page = paging.pods_page(client, CLUSTER, flt, cursor, limit)
        seen += [pod["uid"] for pod in page.pods]
        if page.next is None:
            return seen
        cursor = Cursor.decode(page.next.encode())


def _brute_force(client: redis.Redis, flt: PodFilter) -> list[str]:
    """Every stored view checked, ordered by the rank score of its own fields."""
    ranked = sorted(
        (store.rank_score(view["verdict"], view["milestones"].get("created")), view["uid"])
        for view in queries.all_views(client, CLUSTER)
        if flt.matches(view)
    )
    return [uid for _, uid in ranked]


def _agree(client: redis.Redis, filters: list[PodFilter], limit: int = 41) -> int:
    found = 0
    for flt in filters:
        expected = _brute_force(client, flt)
        assert _pages(client, flt, limit) == expected, flt
        found += bool(expected)
    return found


def _filters(terms: list[str], rng: random.Random) -> list[PodFilter]:
    filters = [PodFilter(q=term) for term in terms]
    for term in terms[::7]:
        filters.append(PodFilter(q=term, verdicts=tuple(rng.sample(v.VERDICT_NAMES, 3))))
        filters.append(PodFilter(q=term, namespace=f"team-api-{rng.randrange(3)}"))
    return filters


@pytest.fixture
def written(redis_client: redis.Redis) -> Writer:
    writer = Writer(redis_client)
    views = _named(template(redis_client), 3000, seed=4)
    for start in range(0, len(views), 700):
        writer.put(views[start : start + 700])
    return writer


def test_pages_equal_a_brute_force_filter(redis_client, written, monkeypatch):
    rng = random.Random(8)
    filters = _filters(_terms(redis_client, rng, 120), rng)
    assert search.current(redis_client, CLUSTER)
    assert _agree(redis_client, filters) > 100  # most terms find pods
    monkeypatch.setattr(paging, "DIRECT", 40)  # broad terms walk the triage order
    assert _agree(redis_client, filters[::3], limit=100) > 30
    monkeypatch.setattr(paging, "READ_MAX", 40)  # and read no posting first
    assert _agree(redis_client, filters[1::3], limit=100) > 30
    monkeypatch.setattr(paging, "WALK_MAX", 300)  # and give up walking, then rank
    assert _agree(redis_client, filters[2::3], limit=100) > 30


@pytest.fixture
def postings_read(monkeypatch) -> list[str]:
    """The trigram postings any client GETs meanwhile (pipelines included)."""
    seen: list[str] = []
    real = redis.Redis.get
    prefix = search.gram_key(CLUSTER, "")

    def spy(self, key, *args, **kwargs):
        if str(key).startswith(prefix):
            seen.append(key)
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "get", spy)
    return seen


def test_a_broad_search_walks_without_reading_a_posting(
    redis_client, written, monkeypatch, postings_read
):
    # Every trigram of "team-" is in each of the 3,000 names: reading and intersecting
    # postings that large (270,000 ordinals each at scale) was most of a broad search's
    # CPU, while the walk's first chunk finds the page.
    monkeypatch.setattr(paging, "READ_MAX", 2000)
    flt = PodFilter(q="team-")
    page = paging.pods_page(redis_client, CLUSTER, flt, None, 100)
    assert [pod["uid"] for pod in page.pods] == _brute_force(redis_client, flt)[:100]
    assert postings_read == []


@pytest.fixture
def walked(monkeypatch) -> list[int]:
    """The pods each chunk of a name search's walk read, in order."""
    reads: list[int] = []
    real = paging._named

    def spy(*args: Any, **kwargs: Any) -> Any:
        for read, kept in real(*args, **kwargs):
            reads.append(read)
            yield read, kept

    monkeypatch.setattr(paging, "_named", spy)
    return reads


def test_common_trigrams_rare_together_stop_the_walk_after_a_chunks_worth(
    redis_client, written, monkeypatch, walked
):
    # Each trigram is in more than READ_MAX names, the text in a handful: at the rate the
    # first CHUNK pods find them a page would take more than WALK_MAX pods, so the walk
    # stops there (not after all 3,000) and the candidates are ordered directly.
    views = sorted(queries.all_views(redis_client, CLUSTER), key=lambda view: view["uid"])
    filters = (PodFilter(q=f"{view['namespace']}/{view['name'][:8]}") for view in views)
    flt = next(f for f in filters if len(_brute_force(redis_client, f)) <= 5)  # a handful
    sizes = search.posting_sizes(redis_client, CLUSTER, flt.q.casefold())
    monkeypatch.setattr(paging, "READ_MAX", min(sizes.values()) - 1)
    assert _pages(redis_client, flt, 100) == _brute_force(redis_client, flt)
    assert sum(walked) >= paging.CHUNK > sum(walked[:-1])


def _scale_like(base: dict[str, Any]) -> list[dict[str, Any]]:
    """The scale trace's store in small: a few churn pods failing or starting, worst in
    the triage order, before 1,500 pods named load-NNNNNN created in one second, running."""
    views = list(make_views(base, 1540, seed=12).values())
    for i, view in enumerate(views[:40]):
        view.update(namespace="load-001", name=f"churn-{i:05x}", verdict=store.RANKED[0])
    for i, view in enumerate(views[40:]):
        view.update(namespace=f"load-{i % 50:03d}", name=f"load-{i * 100:06d}", verdict="running")
        view["milestones"] = {**view["milestones"], "created": "2026-01-01T00:00:00Z"}
    return views


def test_a_walk_judges_its_matches_rate_on_a_sample_not_on_the_first_few_pods(
    redis_client, monkeypatch, walked
):
    # "load-1" is in a third of the names (every trigram of it in more: broad), none of
    # them among the 40 worst pods: a walk that judged the rate on those gave up and
    # ordered every candidate (270,000 at scale, a 150,000-pod tie resolved whole).
    Writer(redis_client).put(_scale_like(template(redis_client)))
    monkeypatch.setattr(paging, "READ_MAX", 200)
    ranked = []
    real = search.ranked
    monkeypatch.setattr(search, "ranked", lambda *args: ranked.append(1) or real(*args))
    for text in ("load-1", "load-00", "d-00"):
        flt = PodFilter(q=text)
        assert min(search.posting_sizes(redis_client, CLUSTER, text).values()) > 200
        page = paging.pods_page(redis_client, CLUSTER, flt, None, 100)
        assert [pod["uid"] for pod in page.pods] == _brute_force(redis_client, flt)[:100]
        assert _pages(redis_client, flt, 100) == _brute_force(redis_client, flt)
    assert ranked == []  # every page found by walking
    assert walked[0] == 40  # the first index's few pods did not end the walk


def test_text_is_matched_as_it_is_written_never_as_a_lua_pattern(redis_client, monkeypatch):
    # Redis checks the names (the walk's chunks, the ordered candidates' resolution): in
    # a Lua pattern "." is any character and "%" an escape; in a name they are themselves.
    views = list(make_views(template(redis_client), 9, seed=13).values())
    names = ("web.v1-a", "webxv1-b", "50%-off", "50x-off", "a[b]-c", "ab-c", "(x)-y", "x-y")
    names += ("b.vq.v1-bxv1",)  # every trigram of "b.v1" (a candidate), and "bxv1"
    for view, name in zip(views, names, strict=True):
        view.update(namespace="shop", name=name)
    Writer(redis_client).put(views)
    terms = ("b.v1", "0%-", "[b]", "(x)", ".v1-a", "%-off")
    for answer in ("ranked", "walked"):
        if answer == "walked":
            monkeypatch.setattr(paging, "DIRECT", 0)
            monkeypatch.setattr(paging, "READ_MAX", 0)
        for term in terms:
            flt = PodFilter(q=term)
            expected = _brute_force(redis_client, flt)
            assert len(expected) == 1, term
            assert _pages(redis_client, flt, 100) == expected, (answer, term)


def test_postings_far_larger_than_the_rarest_are_not_read(
    redis_client, written, monkeypatch, postings_read
):
    # A trigram in SPREAD times more names than the rarest one of the text removes few
    # candidates for what reading it costs (every name of namespace load-013 holds "-01":
    # 62,000 names at scale against 6,700 for "013").
    rng = random.Random(10)
    terms = _terms(redis_client, rng, 400)
    checked = 0
    for term in terms:
        text = term.casefold()
        sizes = search.posting_sizes(redis_client, CLUSTER, text)
        rarest = sorted(sizes, key=lambda gram: (sizes[gram], gram))[: search.FETCHED]
        if not sizes[rarest[0]] or sizes[rarest[-1]] <= search.SPREAD * sizes[rarest[0]]:
            continue
        postings_read.clear()
        search.candidates(redis_client, CLUSTER, text, sizes)
        read = {key.removeprefix(search.gram_key(CLUSTER, "")) for key in postings_read}
        assert read == {g for g in rarest if sizes[g] <= search.SPREAD * sizes[rarest[0]]}, term
        assert _pages(redis_client, PodFilter(q=term), 41) == _brute_force(
            redis_client, PodFilter(q=term)
        )
        checked += 1
    assert checked >= 5


def test_renames_verdict_changes_deletions_and_recreations(redis_client, written):
    rng = random.Random(9)
    views = list(queries.all_views(redis_client, CLUSTER))
    moved = rng.sample(views, 200)
    for view in moved[:100]:  # a hand-made trace's writer moves pods between namespaces
        view["namespace"] = "moved-ns"
    for view in moved[100:]:  # a verdict change moves the pod in the triage order
        view["verdict"] = v.VERDICT_NAMES[(v.VERDICT_NAMES.index(view["verdict"]) + 3) % 9]
        view["milestones"] = {**view["milestones"], "created": "2026-01-01T00:00:01Z"}
    written.put(moved)
    gone = [view["uid"] for view in rng.sample(views, 400)]
    written.drop(gone)
    again = [view for view in views if view["uid"] in set(gone[:50])]  # the same uids back
    born = _named(template(redis_client), 60, seed=5)
    for view, old in zip(born, again, strict=False):  # new uids, the old names
        view["namespace"], view["name"] = old["namespace"], old["name"]
    written.put(again + born)
    terms = ["moved-ns", "moved-ns/", *_terms(redis_client, rng, 60)]
    terms += [f"{old['namespace']}/{old['name']}" for old in again[:10]]
    assert _agree(redis_client, [PodFilter(q=term) for term in terms]) > 40
    assert redis_client.hlen(search.names_key(CLUSTER)) == redis_client.hlen(
        store.pods_key(CLUSTER)
    )


def test_a_rank_shard_goes_with_its_last_pod(redis_client, written):
    ranks = store.k(CLUSTER, "sx", "r", "*")
    assert len(list(redis_client.scan_iter(match=ranks))) == 3  # 3,000 ordinals, 1,024 a shard
    written.drop(list(written.written))
    assert list(redis_client.scan_iter(match=ranks)) == []
    assert paging.pods_page(redis_client, CLUSTER, PodFilter(q="team")).pods == []


def test_an_index_of_the_old_layout_answers_then_is_rebuilt(redis_client, tmp_path):
    trace = tmp_path / "scale.jsonl"
    options = Options(seed=12, nodes=20, pods=300, churn=10.0, duration=60)
    run(find_scenario("scale", None), options, record=trace)
    fold_into_redis(redis_client, "old", trace).snapshot()  # a clean hand-over
    # What version 1 stored: the same postings, names and shards, without the rank
    # shards or the version key (an upgrade keeping Redis's data).
    gone = list(redis_client.scan_iter(match=store.k("old", "sx", "r", "*")))
    redis_client.delete(*gone, search.version_key("old"))
    assert not search.current(redis_client, "old")
    _check(redis_client, "old")  # ordered the old way meanwhile: the same pages
    successor = Folder(redis_client, "old", FoldSettings(block_ms=1))
    assert not successor.search.present()
    successor.restore()
    assert search.current(redis_client, "old")
    assert list(redis_client.scan_iter(match=store.k("old", "sx", "r", "*")))
    _check(redis_client, "old")
