"""What a page reads from Redis (issue 19.5: fewer round trips and bytes per page): the
fold's progress hash only by the fields a request needs (its ``nodes_json`` holds every
node's summary), and no range read of a verdict index that is empty."""

from __future__ import annotations

import time

import pytest
import redis
from django.contrib.auth.models import User

from handoff.live import clusters, health, hosts, paging, queries, search, store
from tests.webui.detail.tracedata import TRACES, fold_into_redis

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, settings):
    settings.HANDOFF_DEMO = False
    client.force_login(User.objects.create_user("alice"))
    return client


@pytest.fixture
def reads(monkeypatch) -> list[tuple[str, str]]:
    """(command, key) of every HGETALL and ZRANGEBYSCORE any client sends meanwhile."""
    seen: list[tuple[str, str]] = []
    for name in ("hgetall", "zrangebyscore"):
        real = getattr(redis.Redis, name)

        def spy(self, key, *args, _real=real, _name=name, **kwargs):
            seen.append((_name, key.decode() if isinstance(key, bytes) else key))
            return _real(self, key, *args, **kwargs)

        monkeypatch.setattr(redis.Redis, name, spy)
    return seen


def test_the_clusters_clock_reads_three_fields_not_the_nodes(redis_client, reads):
    fold_into_redis(redis_client, "c-clock", TRACES / "node-lost.jsonl")
    assert store.fold_state(redis_client, "c-clock", "cursor").keys() == {"cursor"}
    whole = store.fold_state(redis_client, "c-clock")
    assert "nodes_json" in whole
    reads.clear()
    assert queries.head(redis_client, "c-clock", now=1e9) == queries.clock(whole, now=1e9)
    assert ("hgetall", store.fold_key("c-clock")) not in reads


def test_the_board_and_the_api_never_read_the_whole_fold_hash(signed_in, redis_client, reads):
    fold_into_redis(redis_client, "c-board", TRACES / "node-lost.jsonl")
    for path in (
        "/clusters/c-board/",
        "/api/clusters/c-board/summary",
        "/api/clusters/c-board/pods",
        "/api/clusters/c-board/pods?q=work",
    ):
        reads.clear()
        assert signed_in.get(path).status_code == 200, path
        assert ("hgetall", store.fold_key("c-board")) not in reads, path


def test_a_page_walks_no_empty_verdict_index(signed_in, redis_client, monkeypatch):
    fold_into_redis(redis_client, "c-walk", TRACES / "node-lost.jsonl")
    walked: list[str] = []
    ranged = paging._ranged

    def spy(client, key, *args, **kwargs):
        walked.append(key)
        return ranged(client, key, *args, **kwargs)

    monkeypatch.setattr(paging, "_ranged", spy)
    for query in ("", "?attention=1", "?verdict=stuck,running,deleted"):
        walked.clear()
        body = signed_in.get(f"/api/clusters/c-walk/pods{query}").json()
        assert body["pods"], query
        assert walked, query
        assert all(redis_client.zcard(key) for key in walked), (query, walked)


@pytest.fixture
def round_trips(monkeypatch) -> list[int]:
    """Commands and pipelines sent to Redis meanwhile (one per round trip), by any client."""
    sent: list[int] = []
    real = redis.connection.Connection.send_packed_command

    def spy(self, *args, **kwargs):
        sent.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(redis.connection.Connection, "send_packed_command", spy)
    return sent


def test_the_pod_answer_takes_two_round_trips_and_finds_every_namesake(
    redis_client, round_trips, monkeypatch
):
    # Five before (posting sizes, postings, lookup, views, blind intervals): each one
    # more wait for Redis and for the GIL under load (issue 19.5, the pod page's tail).
    fold_into_redis(redis_client, "c-pod", TRACES / "node-lost.jsonl")
    stored = list(queries.pod_views(redis_client, "c-pod").values())
    redis_client.ping()  # the connection is made before counting
    for view in stored:
        round_trips.clear()
        answer = queries.pod(redis_client, "c-pod", view["namespace"], view["name"], view["uid"])
        assert len(round_trips) == 2
        same = {
            other["uid"]
            for other in stored
            if (other["namespace"], other["name"]) == (view["namespace"], view["name"])
        }
        assert answer["uid"] == view["uid"]
        assert {o["uid"] for o in answer["same_name"]} | {view["uid"]} == same
    first, last = stored[0], stored[-1]
    assert queries.pod(redis_client, "c-pod", first["namespace"], first["name"], "nope") is None
    if (first["namespace"], first["name"]) != (last["namespace"], last["name"]):
        assert (
            queries.pod(redis_client, "c-pod", first["namespace"], first["name"], last["uid"])
            is None
        )
    answers = [queries.pod(redis_client, "c-pod", v["namespace"], v["name"], None) for v in stored]
    monkeypatch.setattr(search, "NAMESAKES_MAX", 0)  # a name of common trigrams only: the
    assert answers == [  # postings read here, as before
        queries.pod(redis_client, "c-pod", v["namespace"], v["name"], None) for v in stored
    ]


def _register_watched(client: redis.Redis, count: int) -> None:
    """``count`` kubeconfig clusters: four streams each (three watches and the fold)."""
    for i in range(count):
        clusters.register_cluster(
            client, clusters.ClusterConfig(name=f"c{i}", kind="kubeconfig", kubeconfig="/k")
        )


@pytest.mark.parametrize(
    "path",
    ["/", "/api/clusters", "/clusters/c0/", "/api/clusters/c0/summary", "/healthz"],
)
def test_the_stream_health_a_page_shows_costs_the_same_round_trips_for_20_clusters_as_for_one(
    signed_in, redis_client, round_trips, path
):
    # Every stream's state and lease were read one by one, and the cluster registry and
    # leases twice: 304 round trips for the cluster list of 20 clusters, 292 for a board.
    trips = []
    for count in (1, 20):
        redis_client.flushall()
        _register_watched(redis_client, count)
        signed_in.get(path)  # connections made before counting
        round_trips.clear()
        assert signed_in.get(path).status_code in (200, 503), path  # 503: no worker beats
        trips.append(len(round_trips))
    assert trips[0] == trips[1], path
    assert trips[1] <= 10, path


def test_one_cluster_s_health_is_that_cluster_s_part_of_every_cluster_s(redis_client):
    _register_watched(redis_client, 3)
    hosts.note_host(redis_client, "h1", capacity=4, held=2, until=time.time() + 10)
    store.note_stream(redis_client, "c1", "pods", started=time.time() - 5, events=40)
    store.note_stream(redis_client, "c1", "events", failures=5, last_error="ApiException 500")
    redis_client.xadd(store.events_key("c1"), {"x": "1"})  # an entry the fold has not folded
    now = time.time()
    every = health.check_streams(redis_client, now, health.StreamLimits())
    assert set(every) == {"c0", "c1", "c2"}
    for name in every:
        alone = health.check_streams(redis_client, now, health.StreamLimits(), only=name)
        assert alone == {name: every[name]}
    assert every["c1"]["events"]["problem"] == "5 failed calls in a row, last: ApiException 500"
    assert every["c1"]["fold"]["behind_s"] is not None
    assert hosts.standing(redis_client, now).pool() == hosts.pool(redis_client, now)


def test_the_board_reads_the_fold_s_progress_once(signed_in, redis_client, monkeypatch):
    fold_into_redis(redis_client, "c-once", TRACES / "node-lost.jsonl")
    progress: list[tuple] = []
    real = redis.Redis.hmget

    def spy(self, key, *args, **kwargs):
        if key == store.fold_key("c-once"):
            progress.append(args)
        return real(self, key, *args, **kwargs)

    monkeypatch.setattr(redis.Redis, "hmget", spy)
    page = signed_in.get("/clusters/c-once/")
    assert page.status_code == 200
    assert len(progress) == 1
