"""Watch capacity (issue 21.4): many simulator clusters on one watch worker process.

``CLUSTERS`` simulated ``steady`` clusters (``NODES`` nodes each) are served over HTTP in
this process at wall-clock speed, registered as kubeconfig clusters, and held by one
stream host in a Celery worker started with ``-c 1``: every cluster's pods, nodes and
events watches and its fold, as threads of that one process. Measured:

- whether every stream stays held (sampled each second through ``health.check_streams``);
- watch lag: from the simulator emitting an Event (its ``eventTime``, virtual time taken
  back to the wall clock) to the entry the watch stored in Redis (the entry id's time);
- the fold's lag: how far behind its stream each cluster's fold is, sampled each second;
- the host process's RSS before any stream and with them all, per stream;
- the host process's CPU, per second of wall time (its share of the GIL).
"""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import orjson
import redis
from celery import Celery

from devtools.bench.latency import percentiles
from devtools.bench.results import Figure, Results
from devtools.bench.services import Services
from handoff.live import clusters, health, hosts, store
from handoff.sim import Options, find_scenario
from handoff.sim.runner import serve

CLUSTERS = 20
NODES = 50
STREAMS_PER_CLUSTER = 4  # pods, nodes, events, fold


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no RSS for process {pid}")


def _cpu_s(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _wait(ready, what: str, timeout: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if ready():
            return time.monotonic() - started
        time.sleep(0.2)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


def _host_pid(client: redis.Redis) -> int | None:
    live = hosts.live_hosts(client, time.time())
    return int(next(iter(live)).split(":")[1]) if live else None


def _register(client: redis.Redis, workdir: Path, names: list[str]) -> None:
    for name in names:
        kubeconfig = str(workdir / f"{name}.kubeconfig")
        clusters.register_cluster(
            client, clusters.ClusterConfig(name=name, kind="kubeconfig", kubeconfig=kubeconfig)
        )


def _serve_all(workdir: Path, count: int, nodes: int) -> tuple[list, dict[str, float]]:
    """The simulators and, per cluster, virtual minus wall time (to date their events)."""
    servers, offsets = [], {}
    for i in range(count):
        name = f"cap-{i:02d}"
        options = Options(seed=100 + i, duration=7200, nodes=nodes, start=float(int(time.time())))
        server, _, _ = serve(find_scenario("steady", None), options, "127.0.0.1:0", speed=1)
        server.write_kubeconfig(workdir / f"{name}.kubeconfig")
        servers.append((name, server))
    for name, server in servers:
        with server.lock:
            offsets[name] = server.cluster.loop.now - time.time()
    return servers, offsets


def _event_lags(client: redis.Redis, offsets: dict[str, float], since_ms: int) -> list[float]:
    """Seconds from each Event's emission to its stream entry, for entries after since_ms."""
    lags = []
    for name, offset in offsets.items():
        for entry_id, fields in client.xrange(store.events_key(name), min=since_ms):
            record = orjson.loads(fields[store.STREAM_FIELD])
            obj = record.get("object") or {}
            emitted = obj.get("kind") == "Event" and obj.get("eventTime")
            if record.get("type") != "ADDED" or not emitted:
                continue
            at = datetime.fromisoformat(emitted.replace("Z", "+00:00")).timestamp() - offset
            lags.append(max(0.0, store.stream_id_key(entry_id)[0] / 1000 - at))
    return lags


def _sample(client: redis.Redis, seconds: float) -> tuple[int, list[float]]:
    """Each second: the fewest streams held, and every cluster's fold lag."""
    fewest, behind = 10**9, []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        report = health.check_streams(client, time.time(), health.StreamLimits())
        fewest = min(fewest, sum(s["held"] for per in report.values() for s in per.values()))
        behind += [per["fold"]["behind_s"] for per in report.values() if "fold" in per]
        time.sleep(1.0)
    return fewest, behind


def run_capacity_benchmarks(
    results: Results,
    services: Services,
    count: int = CLUSTERS,
    nodes: int = NODES,
    seconds: float = 120.0,
    warmup: float = 20.0,
) -> dict:
    """Serve ``count`` clusters, hold them all on one worker, measure for ``seconds``."""
    url = services.redis_url()
    client = redis.Redis.from_url(url)
    client.flushall()
    services.worker()
    Celery(broker=url).send_task("handoff.tasks.host", queue="watch")
    _wait(lambda: _host_pid(client), "the stream host", 60)
    pid = _host_pid(client)
    assert pid is not None
    time.sleep(1.0)
    idle_kb = _rss_kb(pid)
    servers, offsets = _serve_all(services.workdir, count, nodes)
    try:
        # Half the clusters first: the RSS step from half to all is what a stream costs,
        # without the one-time imports and pools the first streams bring.
        half = count // 2
        _register(client, services.workdir, [name for name, _ in servers[:half]])
        _wait(
            lambda: hosts.pool(client, time.time()).held >= half * STREAMS_PER_CLUSTER, "half", 120
        )
        time.sleep(warmup / 2)
        half_kb = _rss_kb(pid)
        _register(client, services.workdir, [name for name, _ in servers[half:]])
        streams = count * STREAMS_PER_CLUSTER
        held_in = _wait(
            lambda: hosts.pool(client, time.time()).held >= streams, "every stream", 120
        )
        time.sleep(warmup)
        since_ms = int(time.time() * 1000)
        cpu_before, wall_before = _cpu_s(pid), time.monotonic()
        fewest, behind = _sample(client, seconds)
        cpu = (_cpu_s(pid) - cpu_before) / (time.monotonic() - wall_before)
        lags = _event_lags(client, offsets, since_ms)
        full_kb = _rss_kb(pid)
        stayed = _host_pid(client) == pid
    finally:
        for _, server in servers:
            server.stop()
        client.close()
    lag = percentiles(lags)
    fold = percentiles(behind)
    per_stream_kb = (full_kb - half_kb) / (streams - half * STREAMS_PER_CLUSTER)
    figures = {
        "clusters": count,
        "nodes_per_cluster": nodes,
        "streams": streams,
        "worker_processes": 1,
        "every_stream_held": fewest >= streams and stayed,
        "fewest_held": fewest,
        "all_held_after_s": round(held_in, 1),
        "watch_lag_ms": lag,
        "fold_behind_ms": fold,
        "rss_idle_mb": round(idle_kb / 1024, 1),
        "rss_half_mb": round(half_kb / 1024, 1),
        "rss_mb": round(full_kb / 1024, 1),
        "rss_over_idle_per_stream_kb": round((full_kb - idle_kb) / streams),
        "rss_per_stream_kb": round(per_stream_kb),  # marginal: half the clusters to all
        "host_cpu_cores": round(cpu, 2),
        "seconds": seconds,
    }
    results.sections["capacity"] = figures
    note = f"{count} steady clusters × {nodes} nodes, {streams} streams in one process"  # noqa: RUF001
    results.add(
        Figure(
            "capacity: every stream held",
            float(figures["every_stream_held"]),
            "bool",
            target="all held",
            met=bool(figures["every_stream_held"]),
            note=f"{note}; fewest held {fewest}, all held {held_in:.1f}s after registering",
        )
    )
    results.add(
        Figure(
            "capacity: watch lag p99",
            lag["p99_ms"],
            "ms",
            note=f"Event emitted → stored; p50 {lag['p50_ms']} ms, {lag['n']} events",
        )
    )
    results.add(
        Figure("capacity: fold behind p99", fold["p99_ms"], "ms", note="sampled each second")
    )
    results.add(
        Figure(
            "capacity: RSS per stream",
            round(per_stream_kb),
            "KB",
            note=(
                f"from {half * STREAMS_PER_CLUSTER} to {streams} streams; host "
                f"{figures['rss_idle_mb']} MB idle, {figures['rss_mb']} MB with {streams}"
            ),
        )
    )
    results.add(Figure("capacity: host CPU", figures["host_cpu_cores"], "cores", note=note))
    return figures
