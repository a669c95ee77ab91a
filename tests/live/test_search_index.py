"""Free-text search (``q``) answered from the fold's trigram index (``live/search``): on a
churning scale recording folded by the real fold worker, every query's pages equal the
same pods found by reading every view, through both ways of answering (few candidates
ordered directly, many walked in triage order), after retention and compaction, and after
a crash restore. Short text is refused with a message, never scanned."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from handoff.live import paging, queries, search, store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.paging import Cursor, PodFilter, QueryError
from handoff.sim import Options, find_scenario, run
from tests.webui.detail.tracedata import fold_into_redis


@pytest.fixture(scope="module")
def scale_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scale") / "scale.jsonl"
    options = Options(seed=11, nodes=30, pods=500, churn=15.0, duration=90)
    run(find_scenario("scale", None), options, record=path)
    return path


def _pages(client: redis.Redis, cluster: str, flt: PodFilter, limit: int = 37) -> list[str]:
    seen, cursor = [], None
    while True:
        page = paging.pods_page(client, cluster, flt, cursor, limit)
        seen += [pod["uid"] for pod in page.pods]
        if page.next is None:
            return seen
        cursor = Cursor.decode(page.next.encode())


def _expected(client: redis.Redis, cluster: str, flt: PodFilter) -> list[str]:
    """Every pod in triage order (the indexes' walk, no text), then the text checked on
    each pod's own view."""
    views = {v["uid"]: v for v in queries.all_views(client, cluster)}
    unfiltered = PodFilter(flt.verdicts, flt.namespace, flt.node, flt.binding)
    return [uid for uid in _pages(client, cluster, unfiltered, 500) if flt.matches(views[uid])]


def _queries(client: redis.Redis, cluster: str) -> list[PodFilter]:
    views = sorted(queries.all_views(client, cluster), key=lambda v: v["uid"])
    one, other = views[0], views[len(views) // 2]
    return [
        PodFilter(q=one["name"]),
        PodFilter(q=one["name"][:5].upper()),
        PodFilter(q=one["name"][3:8]),
        PodFilter(q=f"{other['namespace']}/{other['name'][:4]}"),
        PodFilter(q=other["namespace"]),
        PodFilter(q=other["namespace"], verdicts=("running", "succeeded")),
        PodFilter(q=one["name"][:3], binding="scheduler"),
        PodFilter(q="no-such-pod-anywhere"),
        PodFilter(q="ünï/cödé"),
    ]


def _check(client: redis.Redis, cluster: str) -> None:
    checked = 0
    for flt in _queries(client, cluster):
        assert _pages(client, cluster, flt) == _expected(client, cluster, flt), flt.q
        checked += bool(_expected(client, cluster, flt))
    assert checked >= 6  # most queries find pods


def test_search_equals_reading_every_view(redis_client, scale_trace, monkeypatch):
    fold_into_redis(redis_client, "sx", scale_trace)
    assert redis_client.hlen(store.pods_key("sx")) > 500
    _check(redis_client, "sx")  # few candidates: ordered directly
    monkeypatch.setattr(paging, "DIRECT", 5)  # many: the triage order is walked
    _check(redis_client, "sx")
    monkeypatch.setattr(paging, "READ_MAX", 5)  # broad: walked before reading a posting
    _check(redis_client, "sx")
    monkeypatch.setattr(paging, "WALK_MAX", 50)  # a long walk gives up and orders
    _check(redis_client, "sx")


def test_lookups_split_into_short_scripts_give_the_same_answers(
    redis_client, scale_trace, monkeypatch
):
    fold_into_redis(redis_client, "sx-batch", scale_trace)
    namespace = next(queries.all_views(redis_client, "sx-batch"))["namespace"]
    ordinals = sorted(search.candidates(redis_client, "sx-batch", namespace))
    ordinals += [10**6]  # no pod: left out in any batch
    whole = search.resolve(redis_client, "sx-batch", ordinals, namespace)
    found = search.lookup(redis_client, "sx-batch", ordinals)
    named = {uid for uid, (name, _) in found.items() if namespace in name}
    assert sorted(whole.values()) == sorted(named)
    assert len(named) > 20
    entries = redis_client.hmget(search.names_key("sx-batch"), list(whole.values()))
    assert [int(entry.split(b"\t")[0]) for entry in entries] == list(whole)  # its own ordinal
    order = search.ranked(redis_client, "sx-batch", ordinals)
    assert len(order) == len(ordinals) - 1 > 20  # all but the one without a pod
    monkeypatch.setattr(search, "SCRIPT_BATCH", 3)
    monkeypatch.setattr(search, "RANK_BATCH", 3)
    assert search.resolve(redis_client, "sx-batch", ordinals, namespace) == whole
    assert search.lookup(redis_client, "sx-batch", ordinals) == found
    assert search.ranked(redis_client, "sx-batch", ordinals) == order
    _check(redis_client, "sx-batch")


def test_short_text_is_refused_not_scanned(redis_client, scale_trace):
    fold_into_redis(redis_client, "short", scale_trace)
    for text in ("a", "ab", "é", " x"):
        with pytest.raises(QueryError, match="at least 3 characters"):
            PodFilter(q=text)
    # Text that case-folds to three characters or more is searched (ß folds to ss).
    assert paging.pods_page(redis_client, "short", PodFilter(q="ßa")).pods == []


def test_the_index_stays_right_through_retention_compaction_and_a_crash(
    redis_client, scale_trace, monkeypatch
):
    monkeypatch.setattr(search, "COMPACT_AT", 4)
    folder = fold_into_redis(redis_client, "sxk", scale_trace)
    before = sum(redis_client.strlen(k) for k in redis_client.scan_iter("handoff:{sxk}:sx:t:*"))
    folder.settings = FoldSettings(block_ms=1, retention_hours=0.0)
    folder.retain()
    after = sum(redis_client.strlen(k) for k in redis_client.scan_iter("handoff:{sxk}:sx:t:*"))
    assert after < before  # dead ordinals compacted away
    assert redis_client.hlen(search.names_key("sxk")) == redis_client.hlen(store.pods_key("sxk"))
    _check(redis_client, "sxk")
    # A pod page finds its pod (and namesakes) through the index.
    view = next(queries.all_views(redis_client, "sxk"))
    found = queries.pod(redis_client, "sxk", view["namespace"], view["name"], None)
    assert found is not None
    assert (found["namespace"], found["name"]) == (view["namespace"], view["name"])
    # A successor without a usable snapshot clears the index and builds it again.
    redis_client.hset(store.fold_key("sxk"), "cursor", "1-0")
    successor = Folder(redis_client, "sxk", FoldSettings(block_ms=1))
    successor.restore()
    assert redis_client.hlen(search.names_key("sxk")) == redis_client.hlen(store.pods_key("sxk"))
    _check(redis_client, "sxk")
