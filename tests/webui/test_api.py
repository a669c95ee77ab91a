"""The board's JSON API through Django's test client, against the real test redis."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User

from handoff.live import clusters, queries, store

from .pods import make_views, template, triage_order, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client, settings):
    settings.HANDOFF_DEMO = False
    client.force_login(User.objects.create_user("alice"))
    return client


@pytest.fixture
def cluster(redis_client):
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name="prod", kind="kubeconfig"))
    views = make_views(template(redis_client), 300)
    write(redis_client, "prod", views)
    redis_client.hset(store.fold_key("prod"), mapping={"cursor": "1767225600000-3"})
    return views


@pytest.mark.parametrize(
    "url", ["/api/clusters", "/api/clusters/prod/summary", "/api/clusters/prod/pods"]
)
def test_it_answers_anonymous_callers_with_401_json(client, settings, cluster, url):
    settings.HANDOFF_DEMO = False
    response = client.get(url)
    assert response.status_code == 401
    assert response.json() == {"error": "authentication required"}


def test_it_serves_demo_visitors(client, settings, cluster):
    settings.HANDOFF_DEMO = True
    assert client.get("/api/clusters/prod/pods").status_code == 200


@pytest.mark.parametrize("url", ["/api/clusters/nope/summary", "/api/clusters/nope/pods"])
def test_it_answers_unknown_clusters_with_404_json(signed_in, redis_client, url):
    response = signed_in.get(url)
    assert response.status_code == 404
    assert "nope" in response.json()["error"]


def test_it_lists_clusters_with_counts_and_stream_health(signed_in, cluster, redis_client):
    body = signed_in.get("/api/clusters").json()
    (row,) = body["clusters"]
    assert row["name"] == "prod"
    assert row["kind"] == "kubeconfig"
    assert row["pods"] == 300
    assert row["attention"] == sum(1 for x in cluster.values() if x["verdict"] in queries.ATTENTION)
    # No watch holds a lease in this test: just registered, the streams are starting...
    assert row["health"] == "starting"
    assert row["failing"] == []
    assert row["board"] == "/clusters/prod/"
    # ...and failing once nobody took them for longer than HANDOFF_STREAM_UNHELD_LIMIT,
    # as /healthz says.
    for stream in ("pods", "nodes", "events", "fold"):
        store.note_stream(redis_client, "prod", stream, registered=time.time() - 31)
    (row,) = signed_in.get("/api/clusters").json()["clusters"]
    assert row["health"] == "failing"
    assert "prod/pods: no holder for 31s (lease lapsed, no successor)" in row["failing"]


def test_it_summarises_a_cluster(signed_in, cluster):
    body = signed_in.get("/api/clusters/prod/summary").json()
    assert body["stream_cursor"] == "1767225600000-3"
    summary = body["summary"]
    assert summary["pods"] == 300
    for name, count in summary["verdicts"].items():
        assert count == sum(1 for x in cluster.values() if x["verdict"] == name)
    assert summary["sampled"] == 300
    assert set(summary["durations"]["create_to_running"]) == {
        "p50",
        "p90",
        "p99",
        "count",
        "not_observed",
    }
    assert set(body["streams"]["streams"]) == {"pods", "nodes", "events", "fold"}


def test_it_pages_pods_in_the_shape_of_the_triage_json(signed_in, cluster):
    seen, url = [], "/api/clusters/prod/pods?attention=1&limit=40"
    while url:
        body = signed_in.get(url).json()
        assert len(body["pods"]) <= 40
        seen += body["pods"]
        url = body["next"] and f"/api/clusters/prod/pods?attention=1&limit=40&cursor={body['next']}"
    expected = [x for x in cluster.values() if x["verdict"] in queries.ATTENTION]
    assert [p["uid"] for p in seen] == triage_order(expected)
    assert seen[0] == cluster[seen[0]["uid"]]  # the stored view, exactly


def test_it_filters_by_every_parameter(signed_in, cluster):
    query = "verdict=stuck,rejected,running&namespace=ns-3&binding=scheduler&q=POD-00"
    body = signed_in.get(f"/api/clusters/prod/pods?{query}&limit=500").json()
    expected = [
        x
        for x in cluster.values()
        if x["verdict"] in ("stuck", "rejected", "running")
        and x["namespace"] == "ns-3"
        and x["binding"] == "scheduler"
    ]
    assert [p["uid"] for p in body["pods"]] == triage_order(expected)
    node = next(x["node"] for x in cluster.values() if x["node"])
    body = signed_in.get(f"/api/clusters/prod/pods?verdict=all&node={node}&limit=500").json()
    assert body["total"] == sum(1 for x in cluster.values() if x["node"] == node)


@pytest.mark.parametrize(
    "query",
    [
        "verdict=bogus",
        "binding=kubelet",
        "limit=0",
        "limit=501",
        "limit=ten",
        "cursor=not-a-cursor",
        "attention=1&verdict=running",
    ],
)
def test_it_refuses_bad_parameters_with_400_json(signed_in, cluster, query):
    response = signed_in.get(f"/api/clusters/prod/pods?{query}")
    assert response.status_code == 400
    assert response.json()["error"]


def test_it_takes_the_api_token_instead_of_a_session(client, settings, cluster):
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_API_TOKEN = "t0ken-for-scripts"

    good = client.get("/api/clusters/prod/pods", HTTP_AUTHORIZATION="Bearer t0ken-for-scripts")
    wrong = client.get("/api/clusters/prod/pods", HTTP_AUTHORIZATION="Bearer nope")
    bare = client.get("/api/clusters/prod/pods", HTTP_AUTHORIZATION="t0ken-for-scripts")
    write = client.post("/api/clusters/prod/pods", HTTP_AUTHORIZATION="Bearer t0ken-for-scripts")

    assert good.status_code == 200
    assert len(good.json()["pods"]) == 100
    assert wrong.status_code == 401
    assert wrong.json() == {"error": "wrong bearer token"}
    assert "t0ken" not in wrong.content.decode()
    assert bare.status_code == 401
    assert write.status_code == 405  # the token only reads


def test_it_refuses_tokens_when_none_is_configured_and_wrong_ones_even_with_a_session(
    signed_in, settings, cluster
):
    settings.HANDOFF_API_TOKEN = ""
    unset = signed_in.get("/api/clusters", HTTP_AUTHORIZATION="Bearer anything")
    settings.HANDOFF_API_TOKEN = "t0ken-for-scripts"
    wrong = signed_in.get("/api/clusters", HTTP_AUTHORIZATION="Bearer anything")

    assert unset.status_code == 401
    assert "HANDOFF_API_TOKEN" in unset.json()["error"]
    assert wrong.status_code == 401
    assert signed_in.get("/api/clusters").status_code == 200  # the session alone still works


def test_it_serves_the_owners_needing_attention(signed_in, redis_client, tmp_path):
    from handoff.live.sources.playback import replay
    from tests.core.ownershapes import write_trace
    from tests.live.helpers import fold_all

    clusters.register_cluster(redis_client, clusters.ClusterConfig(name="own", kind="trace"))
    replay(redis_client, "own", write_trace(tmp_path / "owners.jsonl", "own"))
    fold_all(redis_client, "own")

    body = signed_in.get("/api/clusters/own/owners").json()

    assert body["cluster"] == "own"
    assert body["stream_cursor"] != "0-0"
    assert [(f["owner"]["kind"], f["cause"]) for f in body["failing"]] == [
        ("StatefulSet", "pod-security"),
        ("ReplicaSet", "quota"),
    ]
    assert body["failing"][0]["message"].startswith("create Pod db-0 in StatefulSet db failed")
    assert [(x["owner"]["name"], x["count"]) for x in body["loops"]] == [("web", 5)]
    assert signed_in.get("/api/clusters/nope/owners").status_code == 404


def test_it_refuses_anonymous_callers_the_owners(client, settings, cluster):
    settings.HANDOFF_DEMO = False
    assert client.get("/api/clusters/prod/owners").status_code == 401
