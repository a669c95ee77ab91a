"""Measure free-text search at scale: ``--pods`` pods with deployment-style names
(``<app>-<replicaset hash>-<suffix>`` in 60 namespaces) written as the fold writes them
(views, indexes, the trigram name index) into a private redis-server, then the pods
API's search query (``paging.pods_page`` with ``q``, the first page of 100, Redis round
trips included, no HTTP) for the pages bench's terms: name prefixes, fragments,
namespaces, namespace/prefix and no match. Prints median, p95, p99, the searching
thread's own CPU time per search (which the machine's load inflates far less than wall
time), Redis's own time per search (its CPU time, ``INFO cpu``) and the index's memory;
then the same for the fleet API's answer from the kept aggregates (``queries.fleet_kept``
+ ``fleet.kept_fleet``, the 10,000-pod swimlane included, JSON-encoded).

    .venv/bin/python -m tests.webui.bench_search [--pods 150000] [--rounds 600]
        [--names deployment|scale] [--trace PATH] [--url redis://...]

``--names scale``: ``team-<i mod 7>/load-<i mod 150,000>``, names re-created, so a prefix
such as ``load-`` or a namespace matches a large share of the store (random verdicts and
creation times, as every synthetic store here). ``--trace``: instead, the store the pages
bench searches, that trace folded by the real fold (``devtools.bench.ingest``; the scale
trace, ``.run/bench/scale-5000-150000.jsonl``: 269,592 pods in namespaces
``load-000``..``load-049``, its first 150,000 named ``load-NNNNNN`` and created in one
second, so one verdict of them is one score behind the churn's ``churn-xxxxx`` pods), and
the pages bench's terms from its sample of the stored pods. ``--url`` uses that Redis and
fills it only when it holds no pods (A/B runs of two checkouts on the same data). The
searching thread's CPU is also given per kind of term (prefix, fragment, namespace,
namespace/prefix, as ``search_terms`` makes them).

Not a test: figures depend on the machine (say how loaded it was when you quote them).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import string
import tempfile
import time
from pathlib import Path
from typing import Any

import django
import orjson
import redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")
django.setup()

from devtools.bench.ingest import ingest  # noqa: E402
from devtools.bench.pages import sample_pods, search_terms  # noqa: E402
from handoff.live import paging, queries, store  # noqa: E402
from handoff.live.pages.fleet import SWIMLANE_LIMIT, kept_fleet  # noqa: E402
from handoff.live.paging import PodFilter, QueryError  # noqa: E402
from tests.conftest import start_redis, stop  # noqa: E402
from tests.webui.pods import make_views, template, write  # noqa: E402

CLUSTER = "bench"
WORDS = ("api", "web", "auth", "cart", "pay", "search", "index", "queue", "mail", "cache")
WORDS += ("feed", "stats", "edge", "log", "metrics")


def names(count: int, seed: int = 3) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    apps = [f"{a}-{b}" for a in WORDS for b in WORDS if a != b]
    sets = [(rng.choice(apps), "".join(rng.choices("0123456789abcdef", k=10))) for _ in range(4000)]
    out = []
    for i in range(count):
        app, hash_ = sets[rng.randrange(len(sets))]
        suffix = "".join(rng.choices(string.ascii_lowercase + string.digits, k=5))
        out.append((f"team-{WORDS[i % len(WORDS)]}-{i % 4}", f"{app}-{hash_}-{suffix}"))
    return out


def scale_names(count: int) -> list[tuple[str, str]]:
    return [(f"team-{i % 7}", f"load-{i % 150_000:05d}") for i in range(count)]


def fill(client: redis.Redis, chosen: list[tuple[str, str]]) -> None:
    pods = len(chosen)
    base = template(client)
    previous: dict = {}
    for start in range(0, pods, 5000):
        views = make_views(base, min(5000, pods - start), seed=start)
        for offset, view in enumerate(views.values()):
            view["namespace"], view["name"] = chosen[start + offset]
        write(client, CLUSTER, views, previous)


def _kind(index: int, count: int) -> str:
    """Which of ``search_terms``'s kinds its ``index``-th term of ``count`` is."""
    if index == count - 1:
        return "no match"
    return ("prefix", "fragment", "namespace", "namespace/prefix")[index % 4]


def _fleet(client: redis.Redis) -> float:
    started = time.perf_counter()
    kept = queries.fleet_kept(client, CLUSTER, SWIMLANE_LIMIT)
    answer = kept_fleet(kept, lambda nodes: queries.node_histograms(client, CLUSTER, nodes))
    orjson.dumps(answer)
    return (time.perf_counter() - started) * 1000


def _redis_cpu(client: redis.Redis) -> float:
    """CPU seconds the redis-server has used: its share of a search, which the machine's
    load does not inflate as it does the wall time."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def _pod_answers(client: redis.Redis, chosen: list[tuple[str, str]]) -> None:
    """The pod page's answer (``queries.pod``, the newest pod of a name, its namesakes
    and watch gaps) for these names: round trips, this thread's CPU, wall, Redis's CPU."""
    trips = [0]
    connection = client.connection_pool.get_connection("PING")
    client.connection_pool.release(connection)
    real = type(connection).send_packed_command

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        trips[0] += 1
        return real(self, *args, **kwargs)

    type(connection).send_packed_command = counted  # type: ignore[method-assign]
    walls, cpus, rounds = [], [], []
    before = _redis_cpu(client)
    try:
        for namespace, name in chosen:
            trips[0] = 0
            started, thread = time.perf_counter(), time.thread_time()
            assert queries.pod(client, CLUSTER, namespace, name, None) is not None
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((time.thread_time() - thread) * 1000)
            rounds.append(trips[0])
    finally:
        type(connection).send_packed_command = real  # type: ignore[method-assign]
    served = (_redis_cpu(client) - before) / len(chosen)
    print(
        f"pod answer: {statistics.median(rounds):.0f} round trips, this thread's CPU median "
        f"{statistics.median(cpus):.2f} ms, wall median {statistics.median(walls):.2f} ms, "
        f"redis {served * 1e6:.0f} us of its CPU (INFO cpu)"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--rounds", type=int, default=600)
    parser.add_argument("--names", choices=("deployment", "scale"), default="deployment")
    parser.add_argument("--trace", type=Path)
    parser.add_argument("--url", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        proc, url = (None, args.url) if args.url else start_redis(Path(work))
        try:
            client = redis.Redis.from_url(url)
            chosen = names(args.pods) if args.names == "deployment" else scale_names(args.pods)
            if not client.hlen(store.pods_key(CLUSTER)):
                if args.trace:
                    ingest(url, args.trace, CLUSTER)
                else:
                    fill(client, chosen)
            if args.trace:
                chosen = sample_pods(client, CLUSTER, 300)  # as the pages bench samples
                terms = search_terms(chosen[:50])
            else:
                terms = search_terms(random.Random(5).sample(chosen, 50))
            samples, cpus, found = [], [], []
            by_kind: dict[str, list[float]] = {}
            cpu = _redis_cpu(client)
            for i in range(args.rounds):
                term = terms[i % len(terms)]
                started, thread = time.perf_counter(), time.thread_time()
                try:
                    page = paging.pods_page(client, CLUSTER, PodFilter(q=term), None, 100)
                    found.append(len(page.pods))
                except QueryError:
                    found.append(-1)
                samples.append((time.perf_counter() - started) * 1000)
                cpus.append((time.thread_time() - thread) * 1000)
                by_kind.setdefault(_kind(i % len(terms), len(terms)), []).append(cpus[-1])
            samples.sort()
            served = _redis_cpu(client) - cpu
            index = sum(
                int(client.memory_usage(key, samples=0) or 0)
                for key in client.scan_iter(match=store.k(CLUSTER, "sx", "*"), count=1000)
            )
            pods = int(client.hlen(store.pods_key(CLUSTER)))
            print(f"{pods} pods, {len(terms)} terms, {args.rounds} searches")
            median = statistics.median(samples)
            p95, p99 = (samples[int(len(samples) * share) - 1] for share in (0.95, 0.99))
            print(
                f"search: median {median:.1f} ms, p95 {p95:.1f} ms, p99 {p99:.1f} ms, "
                f"max {samples[-1]:.1f} ms"
            )
            cpus.sort()
            high = (cpus[int(len(cpus) * share) - 1] for share in (0.95, 0.99))
            print(
                "search, this thread's CPU: median {:.1f} ms, p95 {:.1f} ms, p99 {:.1f} ms, "
                "max {:.1f} ms".format(statistics.median(cpus), *high, cpus[-1])
            )
            for kind, spent in by_kind.items():
                spent.sort()
                print(
                    f"  {kind}: {len(spent)} searches, CPU median {statistics.median(spent):.1f}"
                    f" ms, p99 {spent[int(len(spent) * 0.99) - 1]:.1f} ms, max {spent[-1]:.1f} ms"
                )
            print(f"redis: {served / args.rounds * 1e6:.0f} us of its CPU per search (INFO cpu)")
            full, empty = sum(1 for n in found if n >= 100), sum(1 for n in found if n == 0)
            print(f"pages: {full} full, {empty} empty, {found.count(-1)} refused")
            print(f"index memory: {index / pods:.0f} B/pod (MEMORY USAGE of the sx: keys)")
            fleet = sorted(_fleet(client) for _ in range(max(20, args.rounds // 20)))
            print(f"fleet: median {statistics.median(fleet):.1f} ms, max {fleet[-1]:.1f} ms")
            _pod_answers(client, random.Random(7).sample(chosen, 200))
        finally:
            if proc is not None:
                stop(proc)


if __name__ == "__main__":
    main()
