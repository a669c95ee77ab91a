"""The README's pictures (docs/img/), taken here from the demo scenario so they stay
current: the triage board, one pod's timeline, the fleet page."""

from __future__ import annotations

from pathlib import Path

import redis
from playwright.sync_api import expect

from handoff.live import clusters
from handoff.live.queries import ATTENTION
from handoff.sim import Options, find_scenario, run
from tests.conftest import BASE_DIR
from tests.webui.detail.tracedata import fold_into_redis

IMAGES = BASE_DIR / "docs" / "img"


def test_it_takes_the_readme_screenshots(
    page, demo_site: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    # Two minutes of the demo: its first incident has put a pod of every attention
    # verdict on the board (the seven are checked below).
    trace = tmp_path / "demo-2min.jsonl"
    run(find_scenario("demo", None), Options(seed=0, duration=120), record=trace)
    fold_into_redis(redis_client, "demo", trace)
    clusters.register_cluster(
        redis_client, clusters.ClusterConfig(name="demo", kind="trace", trace=str(trace))
    )
    IMAGES.mkdir(parents=True, exist_ok=True)

    page.goto(f"{demo_site}/clusters/demo/")
    rows = page.locator("tbody[data-rows] tr")
    expect(rows.first).to_be_visible()
    for verdict in ATTENTION:
        expect(rows.locator(".pill", has_text=verdict).first).to_be_visible()
    page.screenshot(path=str(IMAGES / "board.png"))

    rejected = rows.filter(has=page.locator(".pill", has_text="rejected")).first
    rejected.locator("a[data-open]").click()
    page.wait_for_selector("#pod-root[data-loaded='rejected']")
    page.wait_for_selector("#pod-chart .barlayer .trace")
    expect(page.get_by_test_id("rejection")).to_be_visible()
    page.screenshot(path=str(IMAGES / "pod.png"))

    page.goto(f"{demo_site}/clusters/demo/fleet/")
    page.wait_for_selector("#fleet-root[data-loaded]", timeout=60_000)
    page.wait_for_selector("[data-distributions] .js-plotly-plot")
    page.screenshot(path=str(IMAGES / "fleet.png"))
    for name in ("board", "pod", "fleet"):
        assert (IMAGES / f"{name}.png").stat().st_size > 20_000
