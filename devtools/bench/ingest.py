"""Ingest: a recorded trace written to the stream and folded by a real worker."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from devtools.bench.results import Figure, Results
from devtools.bench.services import Services
from handoff.live import aggregates, store


@dataclass
class IngestRun:
    lines: int
    replay_s: float
    fold_s: float
    pods: int
    progress: list[tuple[int, float]]  # (events folded, seconds) along the way
    views_bytes: int  # MEMORY USAGE of the pod views, their indexes and the change index
    used_delta: int  # INFO used_memory after the fold minus before it
    fold_cpu_s: float = 0.0  # CPU seconds of this process during the fold (a shared
    # machine's other work does not count in it, as it does in fold_s)
    pods_hash_bytes: int = 0  # the pod views' hash alone (part of views_bytes)
    search_bytes: int = 0  # the name search index (part of views_bytes)
    fleet_bytes: int = 0  # the fleet's kept histograms and swimlane (part of views_bytes)


def ingest(url: str, trace: Path, cluster: str = "bench") -> IngestRun:
    """The live path in one process: the trace into the cluster's stream as ``replay``
    writes it, then one fold worker (``Folder.step`` as the fold task runs it, pushing to
    the channel layer) until it has folded the whole stream."""
    from channels_redis.core import RedisChannelLayer

    from handoff.live.fold import Folder, FoldSettings
    from handoff.live.push import Publisher
    from handoff.live.sources.playback import replay

    client = redis.Redis.from_url(url)
    client.flushall()
    started = time.perf_counter()
    reader = replay(client, cluster, trace)
    replay_s = time.perf_counter() - started
    lines = int(client.xlen(store.events_key(cluster)))
    before = int(client.info("memory")["used_memory"])
    publisher = Publisher(cluster, layer=RedisChannelLayer(hosts=[url]))
    folder = Folder(client, cluster, FoldSettings(), publisher)
    progress = []
    gc.collect()
    started, cpu = time.perf_counter(), time.process_time()
    while folder.step():
        progress.append((folder.events, time.perf_counter() - started))
    folder.flush()
    fold_s, fold_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    publisher.close()
    del reader
    after = int(client.info("memory")["used_memory"])
    keys = [store.pods_key(cluster), store.changed_key(cluster), store.node_verdicts_key(cluster)]
    keys += list(client.scan_iter(match=store.index_key(cluster, "*", "*"), count=1000))
    sizes = [int(client.memory_usage(key, samples=0) or 0) for key in keys]
    search_bytes = _usage(client, client.scan_iter(match=store.k(cluster, "sx", "*"), count=1000))
    fleet = [aggregates.hist_key(cluster), aggregates.recent_key(cluster)]
    fleet += [aggregates.lanes_key(cluster)]
    fleet += client.scan_iter(match=aggregates.node_hist_key(cluster, "*"), count=1000)
    fleet_bytes = _usage(client, fleet)
    views_bytes = sum(sizes) + search_bytes + fleet_bytes
    pods = int(client.hlen(store.pods_key(cluster)))
    snapshot = int(client.memory_usage(store.snapshot_key(cluster), samples=0) or 0)
    client.close()
    delta = after - before - snapshot
    return IngestRun(
        lines,
        replay_s,
        fold_s,
        pods,
        progress,
        views_bytes,
        delta,
        fold_cpu_s,
        sizes[0],
        search_bytes,
        fleet_bytes,
    )


def _usage(client: redis.Redis, keys: Any) -> int:
    return sum(int(client.memory_usage(key, samples=0) or 0) for key in keys)


def run_ingest_benchmarks(results: Results, services: Services, trace: Path) -> IngestRun:
    run = ingest(services.redis_url(), trace)
    rate = run.lines / run.fold_s
    end_to_end = run.lines / (run.replay_s + run.fold_s)
    results.add(
        Figure(
            "ingest: fold worker, stream → pod views + indexes + push",
            round(rate),
            "events/s",
            "replay: trace → Redis stream",
            round(run.lines / run.replay_s),
            round(rate / (run.lines / run.replay_s), 2),
            "≥ 20k events/s per worker",
            rate >= 20_000,
            f"{run.lines} events, {run.pods} pods, one process (Folder.step as the fold "
            f"task runs it): {run.lines / run.fold_cpu_s:,.0f} events per CPU second of it; "
            f"trace → views end to end {end_to_end:,.0f}/s",
        )
    )
    per_pod = run.views_bytes / max(1, run.pods)
    rest = run.views_bytes - run.pods_hash_bytes - run.search_bytes - run.fleet_bytes
    info_per_pod = run.used_delta / max(1, run.pods)
    results.add(
        Figure(
            "ingest: Redis memory per pod",
            round(per_pod),
            "bytes",
            target="≤ 2 KB per pod",
            met=per_pod <= 2048,
            note=f"MEMORY USAGE of pod views + indexes over {run.pods} pods (views "
            f"{run.pods_hash_bytes / max(1, run.pods):,.0f} B/pod, name search index "
            f"{run.search_bytes / max(1, run.pods):,.0f}, fleet histograms and swimlane "
            f"{run.fleet_bytes / max(1, run.pods):,.0f}, the change index and the other indexes "
            f"{rest / max(1, run.pods):,.0f}); "
            f"INFO used_memory delta without the snapshot: {info_per_pod:,.0f} B/pod",
        )
    )
    results.series["ingest throughput"] = [
        {"events": events, "events_per_s": round(events / seconds)}
        for events, seconds in _thin(run.progress, 40)
        if seconds > 0
    ]
    return run


def _thin(points: list[Any], count: int) -> list[Any]:
    if len(points) <= count:
        return points
    step = len(points) / count
    return [points[int(i * step)] for i in range(count)] + [points[-1]]
