"""The pod page in Chromium: the Plotly timeline, its hover labels, the verdict in words."""

from __future__ import annotations

import orjson
import pytest
import redis

from handoff.live import store
from tests.webui.detail.sites import hover_points
from tests.webui.detail.tracedata import HOSTILE, TRACES, fold_into_redis, hostile_trace


def open_pod(page, site: str, cluster: str, namespace: str, name: str) -> None:
    page.goto(f"{site}/clusters/{cluster}/pods/{namespace}/{name}/")
    page.wait_for_selector("#pod-root[data-loaded]")


def test_it_draws_stage_bars_and_event_markers(
    page, demo_site: str, redis_client: redis.Redis, screenshot
) -> None:
    fold_into_redis(redis_client, "pod-rejected", TRACES / "rejected-outofcpu.jsonl")
    open_pod(page, demo_site, "pod-rejected", "default", "bigcpu")
    assert page.get_attribute("#pod-root", "data-loaded") == "rejected"
    # Stage bars (one trace per stage), event and watch-update markers.
    assert page.locator("#pod-chart .barlayer .trace").count() >= 2
    assert page.locator("#pod-chart .scatterlayer .trace .points path").count() >= 2
    assert page.locator("#pod-chart .legendtext", has_text="kubelet admission").count() == 1
    label = hover_points(page, "#pod-chart", "OutOfcpu")
    assert "OutOfcpu" in label
    assert "kubelet" in label
    assert "count: 1" in label
    screenshot("hover")
    # The verdict in words, and the kubelet's numbers parsed.
    assert "delete it and create it again" in page.inner_text("[data-explanation]")
    cells = page.locator('[data-testid="rejection"] tbody td').all_inner_texts()
    assert cells[:5] == ["OutOfcpu", "cpu", "100,000", "950", "4,000"]
    events = page.locator('[data-testid="events"] tbody').inner_text()
    assert "Node didn't have enough resource" in events
    # Plotly's modebar offers the PNG download.
    page.hover("#pod-chart")
    assert page.locator('#pod-chart .modebar-btn[data-title="Download plot as a PNG"]').count()


def test_it_shows_a_watch_update_on_hover(page, demo_site: str, redis_client: redis.Redis):
    fold_into_redis(redis_client, "pod-missing", TRACES / "stuck-node-missing.jsonl")
    open_pod(page, demo_site, "pod-missing", "default", "ghost5")
    assert "first seen on node worker-2" in hover_points(page, "#pod-chart", "first seen")
    assert "PodGC" in page.inner_text('[data-testid="pod-page"]')
    assert page.locator(".pod-facts .node.missing").count() == 1


def test_it_draws_watch_gaps_as_blind_intervals(
    page, demo_site: str, redis_client: redis.Redis, screenshot
) -> None:
    fold_into_redis(redis_client, "pod-gaps", TRACES / "stuck-node-missing.jsonl")
    gap = {"stream": "events", "from": "2026-03-01T12:30:05.000000Z", "to": "2026-03-01T12:30:09Z"}
    redis_client.lpush(store.blind_key("pod-gaps"), orjson.dumps(gap))
    open_pod(page, demo_site, "pod-gaps", "default", "ghost5")
    legend = page.locator("#pod-chart .legendtext", has_text="watch blind (events)")
    assert legend.count() == 1
    screenshot()


def test_it_shows_hostile_strings_as_text(
    page, demo_site: str, redis_client: redis.Redis, tmp_path, screenshot
) -> None:
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    fold_into_redis(redis_client, "pod-hostile", hostile_trace(tmp_path / "hostile.jsonl"))
    open_pod(page, demo_site, "pod-hostile", "default", "bigcpu")
    assert HOSTILE in page.locator('[data-testid="events"] tbody').inner_text()
    assert HOSTILE in page.inner_text("[data-rejection-message]")
    label = hover_points(page, "#pod-chart", HOSTILE)
    assert HOSTILE in label
    screenshot("hover")
    assert page.locator("#pod-root img, .hoverlayer img").count() == 0
    assert dialogs == []


def test_it_says_when_a_pod_is_unknown(page, demo_site: str, redis_client: redis.Redis):
    fold_into_redis(redis_client, "pod-none", TRACES / "rejected-outofcpu.jsonl")
    open_pod(page, demo_site, "pod-none", "default", "nobody")
    assert page.get_attribute("#pod-root", "data-loaded") == "error"
    assert "no pod default/nobody" in page.inner_text("[data-status]")


@pytest.mark.parametrize(
    "path", ["/clusters/x/pods/default/y/", "/clusters/x/fleet/", "/clusters/x/nodes/", "/replay/"]
)
def test_it_sends_anonymous_visitors_to_sign_in(page, private_site: str, path: str) -> None:
    page.goto(private_site + path)
    assert "/accounts/login/" in page.url


@pytest.mark.parametrize(
    "path",
    ["/api/clusters/x/pods/default/y", "/api/clusters/x/fleet", "/api/clusters/x/nodes"],
)
def test_it_answers_anonymous_api_calls_with_401(page, private_site: str, path: str) -> None:
    response = page.request.get(private_site + path)
    assert response.status == 401
    assert response.json() == {"error": "authentication required"}
