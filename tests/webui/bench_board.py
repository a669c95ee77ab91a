"""Measure the board at scale: 150,000 pods written through store.write_pods into a
private redis-server, then the API's and the board's latency through Daphne, the first
paint in headless Chromium, and Redis memory per pod. Prints medians and p99s.

    .venv/bin/python -m tests.webui.bench_board [--pods 150000] [--rounds 40]

Not a test: figures depend on the machine (say how loaded it was when you quote them).
"""

from __future__ import annotations

import argparse
import http.cookiejar
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import django
import redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")
django.setup()

from devtools.devstack import free_port  # noqa: E402
from handoff.live import clusters, store  # noqa: E402
from tests.conftest import BASE_DIR, spawn, start_redis, stop, wait_until  # noqa: E402
from tests.webui.pods import make_views, template, write  # noqa: E402

CLUSTER = "bench"


def fill(client: redis.Redis, pods: int) -> float:
    """Write ``pods`` pods in batches; returns the seconds it took."""
    base = template(client)
    clusters.register_cluster(client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    previous: dict = {}
    started = time.perf_counter()
    batch = 5000
    for start in range(0, pods, batch):
        views = make_views(base, min(batch, pods - start), seed=start)
        for offset, view in enumerate(views.values()):
            i = start + offset
            view.update(namespace=f"ns-{i % 50}", name=f"pod-{i:06d}")
            view["node"] = None if i % 97 == 0 else f"node-{i % 5000:04d}"
        write(client, CLUSTER, views, previous)
    return time.perf_counter() - started


def timings(opener, url: str, rounds: int) -> tuple[float, float, int]:
    samples = []
    size = 0
    for _ in range(rounds):
        started = time.perf_counter()
        with opener.open(url, timeout=30) as response:
            size = len(response.read())
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return statistics.median(samples), p99, size


def first_paint(site: str, rounds: int) -> list[tuple[float, float]]:
    from playwright.sync_api import sync_playwright

    out = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        context = browser.new_context()
        page = context.new_page()
        page.goto(site + "/")  # signs the demo user in once
        for _ in range(rounds):
            started = time.perf_counter()
            page.goto(f"{site}/clusters/{CLUSTER}/", wait_until="commit")
            page.wait_for_selector("tbody[data-rows] tr")
            rows = (time.perf_counter() - started) * 1000
            fcp = page.evaluate(
                "performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1"
            )
            out.append((rows, fcp))
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-board-"))
    redis_proc, url = start_redis(work)
    procs = [redis_proc]
    try:
        client = redis.Redis.from_url(url)
        before = client.info("memory")["used_memory"]
        seconds = fill(client, args.pods)
        used = client.info("memory")["used_memory"] - before
        pods_bytes = client.memory_usage(store.pods_key(CLUSTER)) or 0
        print(f"wrote {args.pods} pods in {seconds:.1f} s ({args.pods / seconds:,.0f} pods/s)")
        per_pod, views_per_pod = used / args.pods, pods_bytes / args.pods
        print(
            f"redis memory: {per_pod:,.0f} B/pod in all: views {views_per_pod:,.0f} B/pod, "
            f"indexes {per_pod - views_per_pod:,.0f} B/pod"
        )
        env = {
            **os.environ,
            "REDIS_URL": url,
            "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
            "HANDOFF_DEMO": "1",
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            cwd=BASE_DIR,
            env=env,
            check=True,
        )
        port = free_port()
        argv = [sys.executable, "-m", "daphne", "-p", str(port), "handoff.asgi:application"]
        procs.append(spawn(argv, work / "daphne.log", env))
        site = f"http://127.0.0.1:{port}"
        opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        wait_until(lambda: _answers(opener, site + "/healthz"), 30, "Daphne")
        opener.open(site + "/").read()
        api = f"{site}/api/clusters/{CLUSTER}"
        for label, path in [
            ("board HTML (first page embedded)", f"{site}/clusters/{CLUSTER}/"),
            ("pods ?attention=1", f"{api}/pods?attention=1"),
            ("pods ?verdict=stuck", f"{api}/pods?verdict=stuck"),
            ("pods ?namespace=ns-7&binding=manual", f"{api}/pods?namespace=ns-7&binding=manual"),
            ("pods ?node=node-0042&verdict=all", f"{api}/pods?node=node-0042&verdict=all"),
            ("pods ?q=pod-01234", f"{api}/pods?q=pod-01234"),
            ("summary (durations cached 10 s)", f"{api}/summary"),
            ("clusters", f"{site}/api/clusters"),
        ]:
            p50, p99, size = timings(opener, path, args.rounds)
            print(f"{label:40s} p50 {p50:7.1f} ms  p99 {p99:7.1f} ms  {size / 1024:7.1f} KiB")
        paints = first_paint(site, min(args.rounds, 15))
        rows = sorted(r for r, _ in paints)
        fcps = sorted(f for _, f in paints)
        print(
            f"Chromium board: first rows drawn p50 {statistics.median(rows):.0f} ms "
            f"(max {rows[-1]:.0f}); first-contentful-paint p50 {statistics.median(fcps):.0f} ms"
        )
    finally:
        for proc in reversed(procs):
            stop(proc)


def _answers(opener, url: str) -> bool:
    try:
        opener.open(url, timeout=1).read()
    except urllib.error.HTTPError:
        return True  # /healthz says 503 without a Celery worker: Daphne answers all the same
    except OSError:
        return False
    return True


if __name__ == "__main__":
    main()
