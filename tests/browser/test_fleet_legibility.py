"""The fleet page's distribution charts read at a glance: at 1280x800 and 1920x1080, light
and dark, no tick label, percentile label or modebar overlaps another, or a title."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import redis

from handoff.sim import Options, find_scenario, run
from tests.webui.detail.tracedata import fold_into_redis, many_pods_trace

VIEWPORTS = [(1280, 800), (1920, 1080)]
THEMES = ["light", "dark"]

BOXES = """(chart) => {
  const box = (e) => {
    const r = e.getBoundingClientRect();
    return [r.left, r.top, r.right, r.bottom];
  };
  const shown = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const all = (sel) => [...chart.querySelectorAll(sel)].filter(shown).map(box);
  return {
    xticks: all(".xaxislayer-above .xtick text"),
    yticks: all(".yaxislayer-above .ytick text, .yaxislayer-above .y2tick text"),
    labels: all(".annotation-text"),
    modebar: all(".modebar"),
    title: box(chart.closest("figure").querySelector(".chart-title")),
    figure: box(chart.closest("figure")),
    drawn: [...chart.querySelectorAll(".main-svg")].map(box),
  };
}"""


def overlap(a: list[float], b: list[float]) -> bool:
    return a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5


def clashes(boxes: list[list[float]], others: list[list[float]] | None = None) -> list:
    pairs = itertools.combinations(boxes, 2) if others is None else itertools.product(boxes, others)
    return [(a, b) for a, b in pairs if overlap(a, b)]


@pytest.fixture
def clusters(redis_client: redis.Redis, tmp_path: Path) -> list[str]:
    """Identical pods (p50 = p90 = p99: the labels all at one line) and the demo
    scenario's quarter hour (spread out, the 5 s SLO far to the right)."""
    fold_into_redis(redis_client, "legible-same", many_pods_trace(tmp_path / "same.jsonl", 300))
    demo = tmp_path / "demo.jsonl"
    run(find_scenario("demo", None), Options(seed=0, duration=900), record=demo)
    fold_into_redis(redis_client, "legible-demo", demo)
    return ["legible-same", "legible-demo"]


@pytest.mark.parametrize(("width", "height"), VIEWPORTS)
@pytest.mark.parametrize("theme", THEMES)
def test_no_label_overlaps_another_or_a_title(
    browser, demo_site: str, clusters: list[str], width: int, height: int, theme: str
) -> None:
    context = browser.new_context(viewport={"width": width, "height": height})
    context.add_init_script(f"localStorage.setItem('handoff-theme', '{theme}')")
    page = context.new_page()
    try:
        for cluster in clusters:
            page.goto(f"{demo_site}/clusters/{cluster}/fleet/")
            page.wait_for_selector("#fleet-root[data-loaded]", timeout=60_000)
            assert page.evaluate("document.documentElement.dataset.theme") == theme
            charts = page.locator("[data-distributions] .js-plotly-plot")
            assert charts.count() == 4
            for i in range(4):
                chart = charts.nth(i)
                chart.scroll_into_view_if_needed()
                chart.hover()  # shows the modebar
                page.wait_for_timeout(200)
                b = chart.evaluate(BOXES)
                where = f"{cluster} chart {i} at {width}x{height} {theme}"
                assert len(b["xticks"]) >= 2, where
                assert len(b["labels"]) >= 3, where
                assert clashes(b["xticks"]) == [], where
                assert clashes(b["labels"]) == [], where
                assert clashes(b["labels"], b["xticks"] + b["yticks"]) == [], where
                assert clashes(b["modebar"], [b["title"], *b["labels"]]) == [], where
                # Each chart stays inside its own figure: none spills over a neighbour.
                figure = b["figure"]
                for inside in b["drawn"] + b["labels"] + b["xticks"]:
                    assert figure[0] - 1 <= inside[0], where
                    assert inside[2] <= figure[2] + 1, where
            page.screenshot(
                path=str(Path("tests/artifacts") / f"fleet-{cluster}-{width}x{height}-{theme}.png"),
                full_page=True,
            )
    finally:
        context.close()
