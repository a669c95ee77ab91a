"""The dashboard's figures for `make bench` (issue 8, item 5): the API's p50/p99 and the
triage board's first paint in headless Chromium, with the pods the ``ingest`` section
stored (the scale trace's 270,000 real pod views) in the bench's private Redis.

Runs against a real Daphne signed in with a real session (``bench.Services``).
"""

from __future__ import annotations

import statistics
import time
import urllib.request

import redis

from devtools.bench.results import Figure, Results
from devtools.bench.services import Services
from handoff.live import clusters, store

CLUSTER = "bench"  # where bench.ingest folded the trace
FIRST_PAINT_TARGET_MS = 1000.0


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def time_get(url: str, cookie: str, rounds: int) -> tuple[list[float], int]:
    """Milliseconds per GET (body read), and the body's size."""
    opener = urllib.request.build_opener()
    opener.addheaders = [("Cookie", f"sessionid={cookie}"), ("Accept", "application/json")]
    samples, size = [], 0
    for _ in range(rounds):
        started = time.perf_counter()
        with opener.open(url, timeout=60) as answer:
            size = len(answer.read())
        samples.append((time.perf_counter() - started) * 1000)
    return samples, size


def first_paint(site: str, cookie: str, rounds: int) -> tuple[list[float], list[float]]:
    """Navigation start → first board rows drawn, and Chromium's first-contentful-paint."""
    from playwright.sync_api import sync_playwright

    rows, fcps = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context()
        host = site.split("//", 1)[1].split(":", 1)[0]
        context.add_cookies([{"name": "sessionid", "value": cookie, "domain": host, "path": "/"}])
        page = context.new_page()
        for _ in range(rounds):
            started = time.perf_counter()
            page.goto(f"{site}/clusters/{CLUSTER}/", wait_until="commit")
            page.wait_for_selector("tbody[data-rows] tr", timeout=60_000)
            rows.append((time.perf_counter() - started) * 1000)
            fcps.append(
                page.evaluate(
                    "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"
                )
            )
        browser.close()
    return rows, fcps


def run_web_benchmarks(results: Results, services: Services, rounds: int) -> None:
    client = redis.Redis.from_url(services.redis_url())
    pods = int(client.hlen(store.pods_key(CLUSTER)))
    if not pods:
        raise RuntimeError("no pods stored: run the ingest section first")
    if clusters.cluster(client, CLUSTER) is None:  # ingest folds without registering it
        clusters.register_cluster(client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    cookie = services.session_cookie()
    site = "http://" + services.daphne()
    api = f"{site}/api/clusters/{CLUSTER}"
    for label, url in (
        ("API: pods?verdict=stuck", f"{api}/pods?verdict=stuck"),
        ("API: pods?attention=1 (the board's default)", f"{api}/pods?attention=1"),
        ("API: summary", f"{api}/summary"),
        ("board page HTML (first page embedded)", f"{site}/clusters/{CLUSTER}/"),
    ):
        time_get(url, cookie, 2)  # warm: the first request loads Django's URLconf and views
        samples, size = time_get(url, cookie, rounds)
        results.add(
            Figure(
                label,
                round(_p(samples, 0.99), 1),
                "ms p99",
                note=f"p50 {statistics.median(samples):.1f} ms, {rounds} requests, "
                f"{size / 1024:.0f} KiB, {pods:,} pods stored",
            )
        )
    rows, fcps = first_paint(site, cookie, max(5, rounds // 3))
    median = statistics.median(rows)
    results.add(
        Figure(
            "board first paint (headless Chromium)",
            round(median),
            "ms",
            target="≤ 1 s at 150,000 pods",
            # The target is stated for 150,000 pods: a quick run's smaller store says nothing.
            met=median <= FIRST_PAINT_TARGET_MS if pods >= 150_000 else None,
            note=f"first rows drawn, median of {len(rows)} (max {max(rows):.0f} ms); "
            f"first-contentful-paint median {statistics.median(fcps):.0f} ms; "
            f"{pods:,} pods stored",
        )
    )
