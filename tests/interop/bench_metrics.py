"""What a /metrics scrape costs with 150,000 stored pods (docs/interop.md, "Cost").

    .venv/bin/python -m tests.interop.bench_metrics [PODS]

Starts a private redis-server, writes PODS (default 150,000) real pod views through
``store.write_pods`` as the fold worker does, then times the rebuild scrapes (every view
read once, a budget per scrape), scrapes with nothing changed, and scrapes after 6,000 pods
were rewritten (400 pods/s over a 15 s scrape interval). Prints medians of 5.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")

import django

django.setup()

import redis  # noqa: E402

from handoff.core.report import build_report  # noqa: E402
from handoff.core.timeline import fold  # noqa: E402
from handoff.interop.importers import open_events  # noqa: E402
from handoff.live import clusters, metrics, store  # noqa: E402
from handoff.live.health import StreamLimits  # noqa: E402
from tests.interop.conftest import TRACES  # noqa: E402
from tests.webui.pods import make_views, write  # noqa: E402

CHANGED = 6000


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _timed(client: redis.Redis) -> float:
    started = time.perf_counter()
    metrics.metrics_text(client, StreamLimits())
    return time.perf_counter() - started


def main(count: int) -> None:
    port = _free_port()
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--save", "", "--dir", directory],
            stdout=subprocess.DEVNULL,
        )
        try:
            time.sleep(0.5)
            client = redis.Redis(port=port)
            report = build_report(fold(open_events(TRACES / "rejected-outofcpu.jsonl")))
            base = next(p for p in report["pods"] if p["durations"]["create_to_bind"] is not None)
            clusters.register_cluster(client, clusters.ClusterConfig(name="big", kind="trace"))
            views = make_views(base, count)
            client.hset(store.fold_key("big"), "cursor", "1767225600000-0")
            previous = write(client, "big", views)
            print(f"{count} pods stored")
            rebuild = [_timed(client)]
            while "rebuild" in metrics.marks(client, "big"):
                rebuild.append(_timed(client))
            print(
                f"rebuild: {len(rebuild)} scrapes of at most {metrics.REBUILD_BUDGET} views, "
                f"slowest {max(rebuild):.2f} s, {sum(rebuild):.2f} s in all"
            )
            idle = [_timed(client) for _ in range(5)]
            print(f"scrape, nothing changed: median {statistics.median(idle) * 1000:.1f} ms")
            items = list(views.items())
            busy = []
            for step in range(5):
                cursor = 1767225600000 + (step + 1) * 15000
                client.hset(store.fold_key("big"), "cursor", f"{cursor}-0")
                write(client, "big", dict(items[step * CHANGED : (step + 1) * CHANGED]), previous)
                busy.append(_timed(client))
            median = statistics.median(busy) * 1000
            print(f"scrape after {CHANGED} pods changed: median {median:.0f} ms")
        finally:
            server.terminate()
            server.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 150_000)
