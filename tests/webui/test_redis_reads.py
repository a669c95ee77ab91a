"""What a page reads from Redis (issue 19.5: fewer round trips and bytes per page): the
fold's progress hash only by the fields a request needs (its ``nodes_json`` holds every
node's summary), and no range read of a verdict index that is empty."""

from __future__ import annotations

import pytest
import redis
from django.contrib.auth.models import User

from handoff.live import paging, queries, search, store
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
