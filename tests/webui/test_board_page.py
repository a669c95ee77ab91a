"""The cluster list and the board's server side: first page embedded, filters kept."""

from __future__ import annotations

import gc
import json
import re

import pytest
from django.contrib.auth.models import User
from django.template.context import ContextDict

from handoff.live import clusters, queries
from webui.board.views import board

from .pods import make_views, template, write

pytestmark = pytest.mark.django_db
HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def signed_in(client, settings):
    settings.HANDOFF_DEMO = False
    client.force_login(User.objects.create_user("alice"))
    return client


@pytest.fixture
def cluster(redis_client):
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name="prod", kind="simulator"))
    views = make_views(template(redis_client), 150)
    first = next(x for x in views.values() if x["verdict"] == "stuck")
    first["name"] = HOSTILE
    first["reason"] = HOSTILE
    write(redis_client, "prod", views)
    return views


def _initial(response) -> dict:
    text = response.content.decode()
    raw = re.search(
        r'<script id="board-initial" type="application/json">(.*?)</script>', text, re.S
    )
    return json.loads(raw.group(1))


def test_it_lists_clusters_linking_to_their_boards(signed_in, cluster):
    response = signed_in.get("/")
    assert response.status_code == 200
    assert b'href="/clusters/prod/"' in response.content
    assert b"No clusters yet" not in response.content


def test_it_embeds_the_first_page_of_pods_needing_attention(signed_in, cluster):
    response = signed_in.get("/clusters/prod/")
    assert response.status_code == 200
    initial = _initial(response)
    attention = [x for x in cluster.values() if x["verdict"] in ("stuck", "rejected")]
    assert len(initial["pods"]) == min(
        100,
        sum(
            1
            for x in cluster.values()
            if x["verdict"]
            in (
                "stuck",
                "stuck-terminating",
                "podgc-deleted",
                "rejected",
                "node-lost",
                "evicted",
                "awaiting-kubelet",
                "unscheduled",
            )
        ),
    )
    assert attention
    row = initial["pods"][0]
    assert "events" not in row
    assert {k: row[k] for k in ("uid", "verdict", "stages", "podgc")} == {
        k: cluster[row["uid"]][k] for k in ("uid", "verdict", "stages", "podgc")
    }
    text = response.content.decode()
    for attribute in (
        'data-api="/api/clusters/prod/pods"',
        'data-ws="/ws/clusters/prod/"',
        'data-summary="/api/clusters/prod/summary"',
        'data-pod-base="/clusters/prod/pods/"',
    ):
        assert attribute in text
    assert HOSTILE not in text  # escaped, in the JSON as in the HTML
    for path in ("/clusters/prod/fleet/", "/clusters/prod/nodes/", "/replay/"):
        assert f'href="{path}"' in text


def test_it_keeps_filters_from_the_url(signed_in, cluster):
    response = signed_in.get("/clusters/prod/?verdict=running&namespace=ns-4&q=pod&binding=manual")
    initial = _initial(response)
    assert {p["verdict"] for p in initial["pods"]} <= {"running"}
    assert {p["namespace"] for p in initial["pods"]} <= {"ns-4"}
    text = response.content.decode()
    assert 'value="ns-4"' in text
    assert '<option value="running" selected>' in text
    assert '<option value="manual" selected>' in text


def test_it_says_what_is_wrong_with_a_bad_filter(signed_in, cluster):
    response = signed_in.get("/clusters/prod/?verdict=bogus")
    assert response.status_code == 400
    assert b"unknown verdict" in response.content


def test_it_answers_404_for_an_unknown_cluster(signed_in, redis_client):
    assert signed_in.get("/clusters/nope/").status_code == 404


def test_it_sends_anonymous_visitors_to_sign_in(client, settings, cluster):
    settings.HANDOFF_DEMO = False
    response = client.get("/clusters/prod/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_an_empty_board_says_nothing_needs_attention_and_links_the_last_incident(
    signed_in, redis_client
):
    from handoff.live.sources.playback import replay
    from tests.live.helpers import fold_all
    from tests.live.test_fold_worker import TRACES

    clusters.register_cluster(redis_client, clusters.ClusterConfig(name="calm", kind="trace"))
    page = signed_in.get("/clusters/calm/").content.decode()
    assert "No pod needs attention in calm — none has since Handoff began watching it." in (
        " ".join(page.split())
    )
    replay(redis_client, "calm", TRACES / "rejected-outofcpu.jsonl")
    fold_all(redis_client, "calm")
    rejected = next(iter(queries.pod_views(redis_client, "calm").values()))
    page = " ".join(signed_in.get("/clusters/calm/").content.decode().split())
    link = f"/clusters/calm/pods/{rejected['namespace']}/{rejected['name']}/"
    assert "No pod needs attention in calm — last incident" in page
    assert link in page
    assert "(rejected)" in page
    filtered = " ".join(signed_in.get("/clusters/calm/?namespace=x").content.decode().split())
    assert "No pod matches these filters." in filtered


def test_the_rendered_board_leaves_no_template_context_to_the_cyclic_collector(rf, cluster):
    """Django's Context and ContextDict refer to each other; left so, the board's embedded rows
    wait for the collector, whose young collections stop every request of a busy process."""
    request = rf.get("/clusters/prod/")
    request.user = User.objects.create_user("alice")
    gc.collect()
    gc.disable()
    try:
        response = board(request, "prod")
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        contexts = [x for x in gc.garbage if isinstance(x, ContextDict)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert response.status_code == 200
    assert len(_initial(response)["pods"]) > 0
    assert contexts == []
