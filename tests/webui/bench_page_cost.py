"""What one page costs the web process in CPU: the pages bench's store (a trace folded by
the real fold into a private redis-server), then each page of the pages bench (its HTML
and the JSON its script fetches) loaded ``--rounds`` times, one at a time, through
Django's test client in this process, signed in. Prints, per page, the CPU time of this
process per load (the view, templates, JSON, the Redis client's side; not Redis's own
time) and the wall-clock median. CPU time barely moves with the machine's load, so it
compares two versions on a shared machine where the pages bench's p99s cannot.

    .venv/bin/python -m tests.webui.bench_page_cost --trace .run/bench/scale-1000-30000.jsonl

Not a test: figures depend on the machine.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def _redis(work: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [shutil.which("redis-server") or "redis-server", "--port", str(port)]
    argv += ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(work)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, f"redis://127.0.0.1:{port}/0"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    proc, url = _redis(work)
    # Before Django reads its settings: this store, this database, the test client's host.
    os.environ.update(
        REDIS_URL=url,
        DATABASE_URL=f"sqlite:///{work / 'db.sqlite3'}",
        HANDOFF_RUN_DIR=str(work),
        ALLOWED_HOSTS="testserver",
        DJANGO_SETTINGS_MODULE="handoff.settings",
    )
    try:
        measure(url, args.trace, args.rounds)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def measure(url: str, trace: Path, rounds: int) -> None:
    import django

    django.setup()
    import redis
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from devtools.bench.ingest import ingest
    from devtools.bench.pages import CLUSTER, PAGES, page_requests, sample_pods, search_terms
    from handoff.live import clusters, store

    call_command("migrate", verbosity=0)
    ingest(url, trace)
    client = redis.Redis.from_url(url)
    clusters.register_cluster(client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    targets = sample_pods(client, CLUSTER, 300)
    requests = page_requests(targets, search_terms(targets[:50]))
    browser = Client(HTTP_ACCEPT="text/html,application/json")
    browser.force_login(get_user_model().objects.create_user("cost", password=None))
    rng = random.Random(1)
    print(f"{client.hlen(store.pods_key(CLUSTER))} pods; CPU ms per load, wall median")
    for page in PAGES:
        for paths in requests[page][:3]:  # warm: URLconf, templates, the shared answers
            for path in paths:
                browser.get(path)
        walls = []
        cpu = time.process_time()
        for _ in range(rounds):
            started = time.perf_counter()
            for path in rng.choice(requests[page]):
                answer = browser.get(path)
                if answer.status_code != 200:
                    raise RuntimeError(f"HTTP {answer.status_code} for {path}")
            walls.append((time.perf_counter() - started) * 1000)
        per = (time.process_time() - cpu) * 1000 / rounds
        print(f"{page:9s} cpu {per:6.1f} ms   wall median {statistics.median(walls):6.1f} ms")


if __name__ == "__main__":
    main()
