"""The nodes page in Chromium: readiness history, taints, pods per node, missing nodes."""

from __future__ import annotations

import redis

from tests.webui.detail.tracedata import HOSTILE, TRACES, fold_into_redis, hostile_trace


def open_nodes(page, site: str, cluster: str) -> None:
    page.goto(f"{site}/clusters/{cluster}/nodes/")
    page.wait_for_selector("#nodes-root[data-loaded]")


def test_it_lists_pods_pointing_at_missing_nodes(
    page, demo_site: str, redis_client: redis.Redis, screenshot
) -> None:
    fold_into_redis(redis_client, "nodes-missing", TRACES / "stuck-node-missing.jsonl")
    open_nodes(page, demo_site, "nodes-missing")
    missing = page.locator('[data-testid="missing"] tbody tr')
    assert missing.count() == 1
    assert "worker-2" in missing.first.inner_text()
    assert "default/ghost5" in missing.first.inner_text()
    pod_link = missing.first.locator("a")
    assert pod_link.get_attribute("href").startswith("/clusters/nodes-missing/pods/default/ghost5/")
    worker1 = page.locator('[data-testid="nodes"] tbody tr', has_text="worker-1")
    board = worker1.locator("a", has_text="1").first.get_attribute("href")
    assert "node=worker-1" in board
    assert page.locator("#nodes-readiness .js-plotly-plot, #nodes-readiness.js-plotly-plot").count()
    screenshot()


def test_it_draws_readiness_history(page, demo_site: str, redis_client: redis.Redis) -> None:
    fold_into_redis(redis_client, "nodes-lost", TRACES / "node-lost.jsonl")
    open_nodes(page, demo_site, "nodes-lost")
    down = page.locator('[data-testid="nodes"] tbody tr.warning')
    assert down.count() >= 1
    # A Ready bar per watched node, plus one per NotReady interval.
    watched = page.locator('[data-testid="nodes"] tbody tr').count()
    assert page.locator("#nodes-readiness .barlayer .point").count() > watched
    assert "Ready=" in page.locator('[data-testid="nodes"] tbody').inner_text()


def test_it_shows_a_hostile_taint_as_text(
    page, demo_site: str, redis_client: redis.Redis, tmp_path
) -> None:
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    fold_into_redis(redis_client, "nodes-hostile", hostile_trace(tmp_path / "hostile.jsonl"))
    open_nodes(page, demo_site, "nodes-hostile")
    row = page.locator('[data-testid="nodes"] tbody tr', has_text="worker-1")
    assert f"team={HOSTILE}:NoSchedule" in row.inner_text()
    assert page.locator("#nodes-root img").count() == 0
    assert dialogs == []
