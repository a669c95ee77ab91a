"""The README's pictures, taken here from the demo scenario so they stay current: the
triage board, one pod's timeline, the fleet page. A test run writes them to
tests/artifacts/readme/ (the checkout stays clean); `make screenshots`
(HANDOFF_UPDATE_SCREENSHOTS=1) writes them over docs/img/."""

from __future__ import annotations

import os
from pathlib import Path

import redis
from playwright.sync_api import expect

from handoff.live import clusters
from handoff.live.queries import ATTENTION
from handoff.sim import Options, find_scenario, run
from tests.conftest import BASE_DIR
from tests.webui.detail.tracedata import fold_into_redis


def _images() -> Path:
    if os.environ.get("HANDOFF_UPDATE_SCREENSHOTS") == "1":
        return BASE_DIR / "docs" / "img"
    return BASE_DIR / "tests" / "artifacts" / "readme"


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
    images = _images()
    images.mkdir(parents=True, exist_ok=True)

    page.goto(f"{demo_site}/clusters/demo/")
    rows = page.locator("tbody[data-rows] tr")
    expect(rows.first).to_be_visible()
    for verdict in ATTENTION:
        expect(rows.locator(".pill", has_text=verdict).first).to_be_visible()
    page.screenshot(path=str(images / "board.png"))

    rejected = rows.filter(has=page.locator(".pill", has_text="rejected")).first
    rejected.locator("a[data-open]").click()
    page.wait_for_selector("#pod-root[data-loaded='rejected']")
    page.wait_for_selector("#pod-chart .barlayer .trace")
    expect(page.get_by_test_id("rejection")).to_be_visible()
    page.screenshot(path=str(images / "pod.png"))

    page.goto(f"{demo_site}/clusters/demo/fleet/")
    page.wait_for_selector("#fleet-root[data-loaded]", timeout=60_000)
    page.wait_for_selector("[data-distributions] .js-plotly-plot")
    page.screenshot(path=str(images / "fleet.png"))
    for name in ("board", "pod", "fleet"):
        assert (images / f"{name}.png").stat().st_size > 20_000
