"""Every page works under the Content-Security-Policy it is served with: no violation
reported by Chromium, no script error, and the charts draw (Plotly's WebGL swimlane
included)."""

from __future__ import annotations

import urllib.request

import pytest

pytestmark = pytest.mark.slow


def _pages(live_cluster, page) -> list[str]:
    board = live_cluster.board()
    page.goto(board)
    page.wait_for_selector("tbody tr a[href*='/pods/']", timeout=30_000)
    pod = page.locator("tbody tr a[href*='/pods/']").first.get_attribute("href")
    base = live_cluster.site
    return [
        board,
        base + pod,
        f"{base}/clusters/{live_cluster.name}/fleet/",
        f"{base}/clusters/{live_cluster.name}/nodes/",
        f"{base}/replay/",
        f"{base}/",
    ]


def test_pages_run_under_the_policy(page, live_cluster, screenshot) -> None:
    problems: list[str] = []
    page.on(
        "console",
        lambda m: (
            problems.append(m.text)
            if m.type == "error" or "Content Security Policy" in m.text
            else None
        ),
    )
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on(
        "response",
        lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    for url in _pages(live_cluster, page):
        with urllib.request.urlopen(url, timeout=10) as answer:
            policy = answer.headers.get("Content-Security-Policy") or ""
        assert "script-src 'self'" in policy, url
        assert "'unsafe-inline'" not in policy.split("script-src", 1)[1].split(";", 1)[0]
        page.goto(url)
        page.wait_for_load_state("networkidle")
        if page.locator(".js-plotly-plot").count():
            page.wait_for_selector(".js-plotly-plot .main-svg", timeout=15_000)
        screenshot(url.rstrip("/").rsplit("/", 1)[-1] or "home")
    assert not problems, problems
