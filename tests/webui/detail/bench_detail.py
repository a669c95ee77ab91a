"""Benchmark of the detail pages' server side (not a test: run it by hand).

    .venv/bin/python -m tests.webui.detail.bench_detail [--pods 150000] [--replay-pods 50000]
        [--replay-times 60] [--replay-only] [--without-before]

Starts a private redis-server, folds a 10,000-pod trace through the real fold worker,
copies the stored views up to --pods, then times (median of 5) what the fleet, nodes and
pod endpoints do per request, and what the replay does: fold a --replay-pods trace once
with checkpoints, then at --replay-times random times: the seek, the board's two
requests (summary and first page) now and as they were before one judging pass served
both (alternated), a pod page, and the fleet and nodes answers now (``replayed``) and as
they were before, a row per pod (alternated); p50 and p99 of each, wall and CPU time (on
a shared machine the CPU time is the steadier figure). The replay's requests end as the
views' do for a browser: the answer encoded and gzip-packed (``webui.jsonbody.response``
with ``gzip_ok``), since a replay's answers are not shared and are packed per request.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import django
import orjson
import redis

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")
django.setup()

from handoff.core import verdicts as v  # noqa: E402
from handoff.core import viewcodec  # noqa: E402
from handoff.core.report import outline  # noqa: E402
from handoff.live import store  # noqa: E402
from handoff.live.pages.fleet import SWIMLANE_LIMIT, Fleet, fleet_digest  # noqa: E402
from handoff.live.pages.nodes import Nodes, kept, nodes_digest  # noqa: E402
from handoff.offline.replay import ReplayState  # noqa: E402
from tests.conftest import start_redis, stop  # noqa: E402
from tests.webui.detail.tracedata import fold_into_redis, many_pods_trace  # noqa: E402
from webui.detail import replayed  # noqa: E402
from webui.detail.sources import LiveSource, PodFilters, ReplaySource  # noqa: E402
from webui.jsonbody import Encoded, response  # noqa: E402


def sent(body: dict | Encoded) -> bytes:
    """The bytes a browser gets for an answer (it accepts gzip)."""
    return response(body, gzip_ok=True).content


def median_ms(step: Callable[[], object], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def copy_views(client: redis.Redis, cluster: str, total: int) -> None:
    """Fill the store up to ``total`` pods by copying folded views under new uids."""
    views = [viewcodec.decode_view(raw) for raw in client.hvals(store.pods_key(cluster))]
    previous: dict = {}
    batch: dict = {}
    for i in range(total - len(views)):
        view = dict(views[i % len(views)])
        view["uid"] = f"copy-{i:07d}"
        view["name"] = f"copy-{i:07d}"
        view["node"] = f"node-{i % 500:03d}"
        batch[view["uid"]] = (view, viewcodec.encode_view(view))
        if len(batch) == 5000:
            pipe = client.pipeline(transaction=False)
            store.write_pods(pipe, cluster, batch, previous)
            pipe.execute()
            batch = {}
    if batch:
        pipe = client.pipeline(transaction=False)
        store.write_pods(pipe, cluster, batch, previous)
        pipe.execute()


def percentile(samples: list[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def board_before(state: ReplayState, at: float) -> None:
    """The board's two requests as they were before the shared judging pass: the summary
    from its own pass, the list from a row (with durations) of every pod."""
    with ReplaySource(state, at, 60.0) as source:
        outline(source.timeline, at, 60.0)
    with ReplaySource(state, at, 60.0) as source:
        wanted = list(source.rows())
        wanted.sort(key=lambda r: (-v.severity(r.verdict), r.created or "9999", r.namespace))
        [source.view(source.timeline.pods[row.uid]) for row in wanted[:100]]


def board_now(state: ReplayState, at: float) -> None:
    """The board's two requests at one time: /summary, then /pods (its first page)."""
    with ReplaySource(state, at, 60.0) as source:
        sent(source.summary())
    with ReplaySource(state, at, 60.0) as source:
        sent(source.pods(PodFilters(), 0, 100))


def pod_page(state: ReplayState, at: float, rng: random.Random) -> None:
    with ReplaySource(state, at, 60.0) as source:
        sent(source.pod(f"team-{rng.randrange(7)}", f"load-{rng.randrange(1000):05d}", None) or {})


def fleet_page(state: ReplayState, at: float) -> None:
    """What the replay fleet endpoint computes (``api_replay_fleet``)."""
    with ReplaySource(state, at, 60.0) as source:
        sent(Encoded(replayed.fleet_json(source, SWIMLANE_LIMIT)))


def nodes_page(state: ReplayState, at: float) -> None:
    """What the replay nodes endpoint computes (``api_replay_nodes``)."""
    with ReplaySource(state, at, 60.0) as source:
        sent(replayed.nodes_at(source))


def fleet_before(state: ReplayState, at: float) -> None:
    """The replay fleet endpoint as it was: a row of every pod, judged again."""
    with ReplaySource(state, at, 60.0) as source:
        orjson.dumps(fleet_digest(source.rows(), source.evaluated_at))


def nodes_before(state: ReplayState, at: float) -> None:
    with ReplaySource(state, at, 60.0) as source:
        orjson.dumps(nodes_digest(source.rows(), source.nodes(), source.evaluated_at))


def replay_figures(tmp: Path, pods: int, rounds: int, with_before: bool = True) -> None:
    """p50/p99 of replay requests at ``rounds`` random times, now and before, alternated."""
    path = many_pods_trace(tmp / "replay.jsonl", pods)
    start, cpu = time.perf_counter(), time.process_time()
    state = ReplayState.from_file(path)
    built, built_cpu = time.perf_counter() - start, time.process_time() - cpu
    start, cpu = time.perf_counter(), time.process_time()
    replayed.known(state)  # as the trace loader does, right after the fold
    kept, kept_cpu = time.perf_counter() - start, time.process_time() - cpu
    print(
        f"replay: {len(state.events)} events folded with {len(state.checkpoints)}"
        f" checkpoints in {built:.1f} s ({built_cpu:.1f} s CPU); the frozen pods' page"
        f" facts in {kept:.1f} s ({kept_cpu:.1f} s CPU)"
    )
    rng = random.Random(7)
    samples: dict[str, list[float]] = {
        "seek": [],
        "board": [],
        "board before": [],
        "fleet before": [],
        "nodes before": [],
        "pod": [],
        "fleet": [],
        "nodes": [],
    }
    cpu_samples: dict[str, list[float]] = {name: [] for name in samples}
    for _ in range(rounds):
        at = state.times[rng.randrange(len(state.times))]  # a time in the trace's events
        steps = [
            ("seek", lambda at=at: state.timeline_at(at)),
            ("board", lambda at=at: board_now(state, at)),
            ("pod", lambda at=at: pod_page(state, at, rng)),
            ("fleet", lambda at=at: fleet_page(state, at)),
            ("nodes", lambda at=at: nodes_page(state, at)),
        ]
        first = rng.random() < 0.5  # drawn either way: the same times without "before"
        before = [
            ("board before", lambda at=at: board_before(state, at)),
            ("fleet before", lambda at=at: fleet_before(state, at)),
            ("nodes before", lambda at=at: nodes_before(state, at)),
        ]
        if with_before:  # before and now in either order, both from a fresh seek
            steps = [*before, *steps] if first else [*steps, *before]
        for name, step in steps:
            state.timeline_at(state.start)  # away, so each one seeks afresh
            started, cpu = time.perf_counter(), time.process_time()
            step()
            samples[name].append((time.perf_counter() - started) * 1000)
            cpu_samples[name].append((time.process_time() - cpu) * 1000)
            if name.endswith(" before"):
                # Its rows of every pod outlive young collections; the full collection
                # they bring on (the whole trace, about 1.5 s) is its cost, not the next
                # request's: made here, untimed.
                gc.collect()
    for name, times in samples.items():
        if not times:
            continue
        cpu_times = cpu_samples[name]
        print(
            f"replay {name} at a random time: p50 {percentile(times, 0.5):.0f} ms, "
            f"p99 {percentile(times, 0.99):.0f} ms; CPU p50 {percentile(cpu_times, 0.5):.0f}"
            f" ms, p99 {percentile(cpu_times, 0.99):.0f} ms ({len(times)} times)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--replay-pods", type=int, default=50_000)
    parser.add_argument("--replay-times", type=int, default=60)
    parser.add_argument("--replay-only", action="store_true", help="only the replay figures")
    parser.add_argument(
        "--without-before", action="store_true", help="no 'board before' (the old path)"
    )
    args = parser.parse_args()
    if args.replay_only:
        with tempfile.TemporaryDirectory() as tmp:
            replay_figures(Path(tmp), args.replay_pods, args.replay_times, not args.without_before)
        return
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_redis(Path(tmp))
        try:
            client = redis.Redis.from_url(url)
            trace = many_pods_trace(Path(tmp) / "many.jsonl", 10_000)
            fold_into_redis(client, "bench", trace)
            copy_views(client, "bench", args.pods)
            live = LiveSource("bench", client)
            stored = client.hlen(store.pods_key("bench"))
            print(f"live store: {stored} pod views")

            def scan() -> list:
                return list(live.rows())

            def both() -> dict:
                # What /api/clusters/C/fleet and /nodes compute, once per 5 s, together.
                fleet, nodes = Fleet(), Nodes()
                for row in live.rows():
                    fleet.add(row)
                    nodes.add(row)
                fold = live.fold()
                return {"fleet": fleet.result(None), "nodes": nodes.result(fold["nodes"], None)}

            answer = both()
            fleet_mb = len(orjson.dumps(answer["fleet"])) / 1e6
            nodes_mb = len(orjson.dumps(answer["nodes"])) / 1e6
            print(f"read and decode every view: {median_ms(scan, 3):.0f} ms")
            print(f"fleet + nodes aggregates, one pass: {median_ms(both, 3):.0f} ms")
            print(f"answers: fleet {fleet_mb:.1f} MB, nodes {nodes_mb:.2f} MB")

            def by_name() -> object:
                return live.pod("team-3", "load-00003", None)

            print(f"pod by name: {median_ms(by_name):.1f} ms")

            def nodes_kept() -> dict:
                # What /api/clusters/C/nodes reads now: the fold's aggregates.
                fold = live.fold()
                handed = live.handed()
                return kept(handed, fold["nodes"], live.on_missing_nodes, fold["evaluated_at"])

            assert nodes_kept()["nodes"] == answer["nodes"]["nodes"]
            print(f"nodes page from the fold's aggregates: {median_ms(nodes_kept, 7):.1f} ms")

            replay_figures(Path(tmp), args.replay_pods, args.replay_times)
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
