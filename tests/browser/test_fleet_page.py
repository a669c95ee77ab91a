"""The fleet page in Chromium, on pods the real fold worker stored."""

from __future__ import annotations

import redis

from handoff.live.pages.fleet import swimlane_bars
from tests.webui.detail.tracedata import (
    HOSTILE,
    TRACES,
    fold_into_redis,
    hostile_trace,
    many_pods_trace,
)


def open_fleet(page, site: str, cluster: str) -> None:
    page.goto(f"{site}/clusters/{cluster}/fleet/")
    page.wait_for_selector("#fleet-root[data-loaded]", timeout=60_000)


def test_it_draws_distributions_heatmaps_and_10000_swimlanes(
    page, demo_site: str, redis_client: redis.Redis, tmp_path, screenshot
) -> None:
    fold_into_redis(redis_client, "fleet-many", many_pods_trace(tmp_path / "many.jsonl", 10_000))
    with page.expect_response(lambda r: r.url.endswith("/api/clusters/fleet-many/fleet")) as sent:
        open_fleet(page, demo_site, "fleet-many")
    # The 10,000-pod answer travels gzip-packed, as kept; the browser unpacks it.
    assert sent.value.headers["content-encoding"] == "gzip"
    assert int(sent.value.headers["content-length"]) < len(sent.value.body()) / 2
    assert page.get_attribute("#fleet-root", "data-loaded") == "10000"
    page.wait_for_selector('#fleet-swimlane[data-lanes="10000"]', timeout=60_000)
    assert page.locator("#fleet-swimlane canvas").count() >= 1  # WebGL, not 10k SVG paths
    rows = page.locator('[data-testid="percentiles"] tbody tr').all_inner_texts()
    assert len(rows) == 4
    assert all("10000" in row for row in rows)  # every pod reached every milestone
    # A histogram+ECDF chart per duration, each with p50/p90/p99 lines.
    charts = page.locator("[data-distributions] .js-plotly-plot")
    assert charts.count() == 4
    startup = page.locator('[data-duration="create_to_running"]')
    assert startup.locator(".annotation-text", has_text="5 s SLO").count() == 1
    assert startup.locator(".annotation-text", has_text="p99").count() == 1
    assert page.locator("#fleet-heat-failures .heatmaplayer").count() == 1
    assert page.locator("#fleet-heat-failures .ytick", has_text="worker-1").count() == 1
    assert "10000 pods" in page.inner_text("[data-swim-note]")
    screenshot()


def test_it_marks_failures_per_node(page, demo_site: str, redis_client: redis.Redis) -> None:
    fold_into_redis(redis_client, "fleet-missing", TRACES / "stuck-node-missing.jsonl")
    with page.expect_response(
        lambda r: r.url.endswith("/api/clusters/fleet-missing/fleet")
    ) as sent:
        open_fleet(page, demo_site, "fleet-missing")
    page.wait_for_selector('#fleet-swimlane[data-lanes="2"]')
    assert page.locator("#fleet-heat-failures .ytick", has_text="worker-2").count() == 1
    assert page.locator("#fleet-swimlane .ytick", has_text="ghost5").count() == 1
    # The page draws each lane's bars where the answer's rows put them.
    lanes = swimlane_bars(sent.value.json()["swimlane"])
    drawn = page.evaluate(
        """() => document.getElementById("fleet-swimlane").data
          .filter((t) => t.mode === "lines").map((t) => [t.x, t.y])"""
    )
    segments = sorted((y[i], x[i], x[i + 1]) for x, y in drawn for i in range(0, len(x), 3))
    assert segments == sorted(
        (lane, start, end) for lane, bars in enumerate(lanes) for _, start, end in bars
    )
    assert len(drawn) == len({stage for bars in lanes for stage, _, _ in bars})


def test_it_shows_hostile_strings_as_text(
    page, demo_site: str, redis_client: redis.Redis, tmp_path
) -> None:
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    fold_into_redis(redis_client, "fleet-hostile", hostile_trace(tmp_path / "hostile.jsonl"))
    open_fleet(page, demo_site, "fleet-hostile")
    assert page.locator("#fleet-root img").count() == 0
    assert dialogs == []
    assert HOSTILE not in page.content()  # nothing from this trace reaches the markup raw
