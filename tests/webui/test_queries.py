"""Paging and filtering against a real redis holding 20,000 pods written by write_pods."""

from __future__ import annotations

import copy

import pytest

from handoff.live import paging, queries, store
from handoff.live.paging import Cursor, PodFilter, QueryError

from .pods import make_views, template, triage_order, write

COUNT = 20_000


@pytest.fixture(scope="module")
def many(redis_url):
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushall()
    views = make_views(template(client), COUNT)
    yield client, views
    client.close()


@pytest.fixture
def stored(many):
    """The 20,000 pods, written again when a test on an emptied redis ran in between."""
    client, views = many
    if client.hlen(store.pods_key("big")) != COUNT:
        client.flushall()
        write(client, "big", views)
    return client, views


def _all_pages(client, flt: PodFilter, limit: int) -> list[str]:
    seen, cursor = [], None
    while True:
        page = paging.pods_page(client, "big", flt, cursor, limit)
        seen += [pod["uid"] for pod in page.pods]
        assert len(page.pods) <= limit
        if page.next is None:
            return seen
        cursor = Cursor.decode(page.next.encode())


def _expected(views, flt: PodFilter) -> list[str]:
    return triage_order([x for x in views.values() if flt.matches(x)])


def test_it_pages_every_pod_in_triage_order(stored):
    client, views = stored
    assert _all_pages(client, PodFilter(), 500) == triage_order(list(views.values()))


@pytest.mark.parametrize(
    "flt",
    [
        PodFilter(verdicts=queries.ATTENTION),
        PodFilter(verdicts=("stuck",)),
        PodFilter(namespace="ns-3"),
        PodFilter(node="node-7", verdicts=("rejected", "running")),
        PodFilter(node=""),
        PodFilter(binding="static"),
        PodFilter(binding="scheduler"),
        PodFilter(binding="scheduler", verdicts=("stuck", "running"), namespace="ns-2"),
        PodFilter(binding="scheduler", q="pod-000"),
        PodFilter(binding="manual", namespace="ns-5", verdicts=queries.ATTENTION),
        PodFilter(q="POD-0001"),
        PodFilter(q="NS-1", verdicts=("evicted", "stuck"), node="node-2"),
    ],
    ids=repr,
)
def test_it_filters_and_keeps_the_cursor_continuous(stored, flt):
    client, views = stored
    expected = _expected(views, flt)
    assert expected, "the filter should match some pods"
    assert _all_pages(client, flt, 97) == expected
    first = paging.pods_page(client, "big", flt, None, 50)
    if first.total is not None:
        assert first.total == len(expected)


def test_it_continues_past_pods_that_share_a_score(redis_client):
    base = template(redis_client)
    views = make_views(base, 30)
    for view in views.values():  # one verdict, one creation time: every score equal
        view["verdict"] = "stuck"
        view["milestones"]["created"] = "2026-01-01T00:00:00.000000Z"
    write(redis_client, "big", views)
    flt = PodFilter()
    assert _all_pages(redis_client, flt, 7) == sorted(views)


def _tied(client, count: int) -> dict[str, dict]:
    """``count`` pods of which most share one score (one verdict, one creation second, as
    a scale-up makes them), some older and newer around them, on two nodes."""
    views = make_views(template(client), count, seed=11)
    for i, view in enumerate(views.values()):
        view["verdict"] = "stuck"
        view["node"] = f"node-{i % 2}"
        second = 0 if i % 10 == 0 else 5 if i % 10 != 9 else 9
        view["milestones"]["created"] = f"2026-01-01T00:00:0{second}Z"
    write(client, "big", views)
    return views


def test_it_pages_through_thousands_of_pods_that_share_a_score(redis_client):
    views = _tied(redis_client, 3000)
    for flt in (PodFilter(), PodFilter(verdicts=("stuck",)), PodFilter(node="node-1")):
        assert _all_pages(redis_client, flt, 113) == _expected(views, flt), flt


def test_a_page_inside_a_tie_reads_the_page_not_the_tie(redis_client):
    """A cursor in the middle of 2,400 tied pods: the next page is found by rank (a few
    one-member reads), never by reading every pod of that score."""
    views = _tied(redis_client, 3000)
    order = _expected(views, PodFilter())
    cursor = None
    for _ in range(3):  # pages of paging.MAX_LIMIT (500)
        cursor = paging.pods_page(redis_client, "big", PodFilter(), cursor, 500).next
    redis_client.config_resetstat()
    page = paging.pods_page(redis_client, "big", PodFilter(), cursor, 50)
    assert [pod["uid"] for pod in page.pods] == order[1500:1550]
    stats = redis_client.info("commandstats")
    assert "cmdstat_zrangebyscore" not in stats
    assert stats["cmdstat_zrange"]["calls"] <= 16  # log2(2,400) halvings and the page


def test_it_continues_after_a_cursor_whose_pod_left_or_moved(redis_client):
    views = _tied(redis_client, 400)
    order = _expected(views, PodFilter())
    first = paging.pods_page(redis_client, "big", PodFilter(), None, 150)
    gone = first.next.uid
    pipe = redis_client.pipeline(transaction=False)
    store.drop_pods(pipe, "big", [gone], {})
    pipe.execute()
    rest = order[150:]
    seen, cursor = [], first.next
    while cursor is not None:
        page = paging.pods_page(redis_client, "big", PodFilter(), cursor, 60)
        seen += [pod["uid"] for pod in page.pods]
        cursor = page.next
    assert seen == rest


def test_tied_pods_follow_redis_byte_order_of_uids(redis_client):
    """Uids that a collation locale would order otherwise ("a-b" / "ab", case, é)."""
    base = template(redis_client)
    uids = ["a-b", "ab", "aB", "Ab", "a_b", "a", "ab-", "\u00e9t\u00e9", "e", "z", "Z", "0"]
    views = {}
    for uid in uids:
        view = copy.deepcopy(base)
        view.update(uid=uid, verdict="stuck", name=f"pod-{uid}")
        view["milestones"] = {**view["milestones"], "created": "2026-01-01T00:00:00Z"}
        views[uid] = view
    write(redis_client, "big", views)
    expected = sorted(uids, key=lambda u: u.encode())
    for limit in (1, 2, 5):
        assert _all_pages(redis_client, PodFilter(), limit) == expected


def test_it_moves_a_pod_between_indexes_when_its_verdict_changes(redis_client):
    views = make_views(template(redis_client), 50)
    previous = write(redis_client, "big", views)
    uid = next(u for u, x in views.items() if x["verdict"] == "awaiting-kubelet")
    views[uid] = {**views[uid], "verdict": "stuck", "binding": "scheduler"}
    write(redis_client, "big", {uid: views[uid]}, previous)
    assert uid in [p["uid"] for p in _page(redis_client, PodFilter(verdicts=("stuck",)))]
    assert uid not in [
        p["uid"] for p in _page(redis_client, PodFilter(verdicts=("awaiting-kubelet",)))
    ]
    for binding in ("manual", "unknown", "static"):
        assert uid not in store.pods_by(redis_client, "big", "binding", binding)
    assert _all_pages(redis_client, PodFilter(), 10) == triage_order(list(views.values()))


def test_it_drops_pods_from_every_index_and_logs_the_removal(redis_client):
    views = make_views(template(redis_client), 40)
    write(redis_client, "big", views)
    gone = sorted(views)[:5]
    pipe = redis_client.pipeline(transaction=False)
    store.drop_pods(pipe, "big", gone, {})
    pipe.execute()
    left = [x for u, x in views.items() if u not in gone]
    assert _all_pages(redis_client, PodFilter(), 9) == triage_order(left)
    for uid in gone:
        assert not any(
            uid in store.pods_by(redis_client, "big", by, x["namespace"])
            for by in ("ns",)
            for x in views.values()
        )
    members = redis_client.zrange(store.changed_key("big"), 0, -1)
    assert {store.member_uid(m) for m in members} == set(views) - set(gone)
    removed = {u.decode() for u in redis_client.zrange(store.removed_key("big"), 0, -1)}
    assert removed == set(gone)


def _page(client, flt):
    return paging.pods_page(client, "big", flt, None, 500).pods


def test_it_matches_free_text_as_text_not_as_a_pattern(redis_client):
    views = make_views(template(redis_client), 20)
    hostile = next(iter(views.values()))
    hostile["name"] = "a*b?[c]\\d<img src=x onerror=alert(1)>"
    write(redis_client, "big", views)
    assert [p["uid"] for p in _page(redis_client, PodFilter(q="*B?[C]\\"))] == [hostile["uid"]]
    assert [p["uid"] for p in _page(redis_client, PodFilter(q="<IMG src"))] == [hostile["uid"]]
    assert _page(redis_client, PodFilter(q="a*x")) == []
    # The uid is not part of what q searches.
    assert _page(redis_client, PodFilter(q=hostile["uid"][:12])) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {"verdicts": ("nope",)},
        {"binding": "kubelet"},
        {"q": "x" * 201},
        {"q": "pod\x00"},
        {"q": "\n"},
        {"q": "a\tb"},
    ],
)
def test_it_refuses_unknown_filters(kwargs):
    with pytest.raises(QueryError):
        PodFilter(**kwargs)


@pytest.mark.parametrize("text", ["", "bm90IGpzb24", "WzEsMl0", "eyJhIjoxfQ", "%%%"])
def test_it_refuses_cursors_it_did_not_make(text):
    with pytest.raises(QueryError):
        Cursor.decode(text)


def test_it_counts_pods_per_verdict_from_the_indexes(stored):
    client, views = stored
    counts = queries.counts(client, "big")
    assert counts["pods"] == COUNT
    for name, count in counts["verdicts"].items():
        assert count == sum(1 for x in views.values() if x["verdict"] == name)
    assert counts["attention"] == sum(
        1 for x in views.values() if x["verdict"] in queries.ATTENTION
    )


def test_it_gives_exact_duration_percentiles_up_to_the_sample_size_then_samples(redis_client):
    from handoff.core.durations import summarise

    views = make_views(template(redis_client), 60)
    for i, view in enumerate(views.values()):
        view["durations"] = {**view["durations"], "create_to_running": float(i)}
    write(redis_client, "big", views)
    exact = queries.durations(redis_client, "big", sample=100)
    samples: dict[str, list[float]] = {}
    for view in views.values():
        for name, value in view["durations"].items():
            if value is not None:
                samples.setdefault(name, []).append(value)
    assert exact["sampled"] == 60
    assert exact["durations"] == summarise(samples)
    assert exact["durations"]["create_to_running"]["p50"] == 29.0
    sampled = queries.durations(redis_client, "big", sample=20)
    assert sampled["pods"] == 60
    assert sampled["sampled"] == 20
    assert sampled["durations"]["create_to_running"]["count"] == 20
