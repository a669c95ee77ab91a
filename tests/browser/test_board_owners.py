"""The board's owners in Chromium: loops as one banner each, controllers creating no pods
as rows with their own message (cluster text as text), and rows grouped by owner."""

from __future__ import annotations

import orjson
import pytest
import redis
from playwright.sync_api import expect

from handoff.live import clusters, store
from handoff.live.sources.playback import replay
from tests.core.ownershapes import write_trace
from tests.live.helpers import fold_all

CLUSTER = "owners-board"


@pytest.fixture
def owners_cluster(redis_url: str, tmp_path):
    client = redis.Redis.from_url(redis_url)
    store.forget_cluster(client, CLUSTER)
    clusters.register_cluster(client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    replay(client, CLUSTER, write_trace(tmp_path / "owners.jsonl", CLUSTER))
    fold_all(client, CLUSTER)
    yield client
    store.forget_cluster(client, CLUSTER)
    client.close()


def test_loops_and_failing_owners_show_above_the_pods(page, demo_site, owners_cluster, screenshot):
    page.goto(f"{demo_site}/clusters/{CLUSTER}/?verdict=all")

    loop = page.get_by_test_id("loop")
    expect(loop).to_have_count(1)
    expect(loop).to_contain_text("Deployment default/web")
    expect(loop).to_contain_text("5 pods podgc-deleted (orphaned), one every 60s")
    rows = page.get_by_test_id("failing-owner")
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("StatefulSet default/db")
    expect(rows.first).to_contain_text('violates PodSecurity "restricted:latest"')
    expect(rows.nth(1)).to_contain_text("quota")
    screenshot("owners")


def test_rows_group_under_their_owner_and_ungroup(page, demo_site, owners_cluster, screenshot):
    page.goto(f"{demo_site}/clusters/{CLUSTER}/?verdict=all")
    expect(page.locator("tbody[data-rows] tr[data-uid]")).to_have_count(6)
    expect(page.get_by_test_id("group")).to_have_count(0)

    page.get_by_test_id("group-owner").check()

    groups = page.get_by_test_id("group")
    expect(groups).to_have_count(2)
    web = page.locator('tr.group[data-group="Deployment/default/web"]')
    expect(web).to_contain_text("5 shown")
    expect(web).to_contain_text("loop")
    expect(page.locator('tr.group[data-group="ReplicaSet/default/api-6f7d"]')).to_contain_text(
        "1 shown"
    )
    # The five looping pods follow their owner's header.
    following = page.locator('tr.group[data-group="Deployment/default/web"] ~ tr[data-uid]')
    expect(following.first).to_contain_text("web-5d8f7c9b6-p")
    assert "group=owner" in page.url
    screenshot("grouped")

    page.reload()
    expect(page.get_by_test_id("group")).to_have_count(2)
    page.get_by_test_id("group-owner").uncheck()
    expect(page.get_by_test_id("group")).to_have_count(0)
    expect(page.locator("tbody[data-rows] tr[data-uid]")).to_have_count(6)


def test_a_controllers_message_is_shown_as_text(page, demo_site, owners_cluster):
    from handoff.core.trace import format_time
    from tests.core.ownershapes import owner_event

    hostile = '<img src=x onerror="document.title=1">'
    event = owner_event("Job", "x<b>y</b>", "FailedCreate", f"Error creating: {hostile}", 400)
    line = {"observed": format_time(1_780_000_400.0), "type": "ADDED", "object": event}
    store.append(owners_cluster, CLUSTER, [orjson.dumps(line)])
    fold_all(owners_cluster, CLUSTER)

    page.goto(f"{demo_site}/clusters/{CLUSTER}/")

    row = page.locator('[data-testid="failing-owner"][data-key="Job/default/x<b>y</b>"]')
    expect(row).to_contain_text(f"Error creating: {hostile}")
    expect(row).to_contain_text("Job default/x<b>y</b>")
    assert page.locator("[data-owner-list] img, [data-owner-list] b").count() == 0
    assert page.title() != "1"
