"""One fault-suite run: `simulate --serve` with armed faults, watched by real Celery
workers into Redis, compared with the simulator's own recording of the same seed.

Faults never touch the simulation (docs/simulator.md), so the recording is the fault-free
run: the timelines in Redis must end with its verdicts, and every pod and node version it
saw after the watchers' first list must be in the Redis stream, unless it fell in a blind
interval the watchers recorded.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import redis

from devtools.devstack import free_port
from handoff.core.report import build_report
from handoff.core.trace import TraceReader, parse_time
from handoff.live import clusters, health, leases, queries, store
from handoff.offline.triage import fold_file
from tests.conftest import python_env, spawn, stop, wait_until

CLUSTER = "sim"
STREAMS = ("pods", "nodes", "events", "fold")
WATCHED = ("pods", "nodes", "events")
# Short windows, leases and timeouts so hand-overs, stalls and take-overs fit in a test.
FAST = {
    "HANDOFF_WATCH_WINDOW": "8",
    # The simulator bookmarks every 60 virtual s (6 s at speed 10) and ends each watch
    # after 4 s: a read timeout of 5 s only fires on a watch that really went silent.
    "HANDOFF_WATCH_SERVER_TIMEOUT": "4",
    "HANDOFF_WATCH_READ_TIMEOUT": "5",
    "HANDOFF_LEASE_TTL": "3",
    "HANDOFF_SUPERVISE_INTERVAL": "1",
}


@dataclass
class Run:
    tmp: Path
    client: redis.Redis
    env: dict[str, str]
    sim: subprocess.Popen
    address: str
    recording: Path
    started: float
    speed: float
    duration: float
    workers: subprocess.Popen | None = None
    beat: subprocess.Popen | None = None
    last_faults: dict[str, Any] | None = None
    final_streams: dict[str, dict[str, str]] | None = None

    def faults(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(f"{self.address}/_sim/faults", timeout=5) as answer:
            return orjson.loads(answer.read())

    def clock(self, running: bool | None = None) -> dict[str, Any]:
        """The simulator's clock; with ``running``, start or pause it first."""
        import urllib.request

        body = None if running is None else orjson.dumps({"running": running})
        request = urllib.request.Request(f"{self.address}/_sim/clock", data=body)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return orjson.loads(answer.read())

    @property
    def injected(self) -> dict[str, int]:
        """Faults injected so far, by kind (read from the saved answer once stopped)."""
        if self.sim.poll() is None:
            self.last_faults = self.faults()
        return self.last_faults.get("injected", {})

    def stream(self, resource: str) -> dict[str, str]:
        return store.stream_state(self.client, CLUSTER, resource)


def start(
    tmp: Path,
    client: redis.Redis,
    faults: list[dict[str, Any]] | None,
    *,
    speed: float = 10,
    duration: float = 180,
    redis_url: str | None = None,
) -> Run:
    """Workers and beat first (so beat has run and the heartbeat is fresh), then the served
    simulator with its clock paused at virtual time 0, then the cluster's registration.
    Once every stream is held and every watch has its first list, the clock starts and
    ``started`` is taken: however late the watchers listed, they saw every pod. Faults
    with ``at`` stay dormant until then; a fault that delays the first lists (a throttle
    without ``at``) only delays the start."""
    env = python_env(HANDOFF_RUN_DIR=str(tmp), **FAST)
    if redis_url:
        env["REDIS_URL"] = redis_url
    client.delete(health.HEARTBEAT_KEY)
    workers = _worker(tmp, env, "w1")
    beat = _beat(tmp, env)
    wait_until(lambda: client.get(health.HEARTBEAT_KEY), 30, "the worker's heartbeat")
    kubeconfig, recording = tmp / "kubeconfig", tmp / "sim.jsonl"
    port = free_port()
    argv = [sys.executable, "manage.py", "simulate", "--scenario", "manual-scheduling"]
    argv += ["--seed", "3", "--speed", str(speed), "--duration", str(duration)]
    argv += ["--serve", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig), "--paused"]
    argv += ["--record", str(recording)]
    if faults:
        argv += ["--faults", orjson.dumps(faults).decode()]
    sim = spawn(argv, tmp / "simulator.log", env)
    wait_until(kubeconfig.exists, 30, "the simulator's kubeconfig")
    clusters.register_cluster(
        client, clusters.ClusterConfig(name=CLUSTER, kind="kubeconfig", kubeconfig=str(kubeconfig))
    )
    run = Run(
        tmp,
        client,
        env,
        sim,
        f"http://127.0.0.1:{port}",
        recording,
        0.0,  # until the clock starts
        speed,
        duration,
        workers=workers,
        beat=beat,
    )
    wait_until(lambda: all_held(run), 60, "every stream to be held")
    wait_until(lambda: all_listed(run), 60, "every watch's first list")
    assert run.clock(running=True)["running"] is True
    run.started = time.monotonic()
    return run


def _worker(tmp: Path, env: dict[str, str], name: str, concurrency: int = 5) -> subprocess.Popen:
    argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", "default,watch"]
    argv += ["-c", str(concurrency), "-n", f"{name}@%h", "-l", "info"]
    argv += ["--without-gossip", "--without-mingle"]
    return spawn(argv, tmp / f"{name}.log", env)


def _beat(tmp: Path, env: dict[str, str]) -> subprocess.Popen:
    argv = [sys.executable, "-m", "celery", "-A", "handoff", "beat", "-l", "info"]
    argv += ["-s", str(tmp / "beat-schedule")]
    return spawn(argv, tmp / "beat.log", env)


def restart_beat(run: Run) -> None:
    run.beat = _beat(run.tmp, run.env)


def stop_run(run: Run) -> None:
    for proc in (run.sim, run.beat, run.workers):
        if proc is not None and proc.poll() is None:
            stop(proc)


def all_held(run: Run) -> bool:
    return all(leases.holder(run.client, CLUSTER, s) for s in STREAMS)


def all_listed(run: Run) -> bool:
    """Every watched resource has finished its first list (its stream has a version)."""
    return all(run.stream(r).get("rv") for r in WATCHED)


def settled(run: Run) -> bool:
    """The stream has been quiet for a while and the fold has caught up with it."""
    last = run.client.xrevrange(store.events_key(CLUSTER), count=1)
    if not last:
        return False
    quiet = time.time() - store.stream_id_key(last[0][0])[0] / 1000 > 2.0
    return quiet and store.fold_state(run.client, CLUSTER).get("cursor") == last[0][0].decode()


def finish(run: Run) -> dict[str, dict]:
    """Wait for the simulated run's end and the fold to catch up; stop the simulator."""
    wall = run.duration / run.speed
    wait_until(lambda: time.monotonic() - run.started > wall + 1, wall + 60, "the run's end")
    wait_until(lambda: run.clock()["elapsed"] >= run.duration, 30, "the virtual end")
    wait_until(lambda: settled(run), 90, "the fold to catch up")
    run.last_faults = run.faults()
    run.final_streams = {r: run.stream(r) for r in STREAMS}
    run.sim.send_signal(signal.SIGTERM)  # flushes the simulator's own recording
    run.sim.wait(timeout=20)
    return queries.pod_views(run.client, CLUSTER)


def verdicts(views: dict | list) -> dict:
    items = views.values() if isinstance(views, dict) else views
    return {(v["namespace"], v["name"], v["uid"]): (v["verdict"], v["reason"]) for v in items}


def offline(path: Path) -> list[dict]:
    timeline, _ = fold_file(path)
    return build_report(timeline)["pods"]


def versions(lines: list[tuple[float, dict]]) -> set[tuple[str, str, int]]:
    out = set()
    for _, record in lines:
        obj = record.get("object") or {}
        meta = obj.get("metadata") or {}
        if obj.get("kind") in ("Pod", "Node") and record.get("type") != "BOOKMARK":
            out.add((obj["kind"], meta.get("uid", ""), int(meta.get("resourceVersion") or 0)))
    return out


def recorded_lines(path: Path) -> list[tuple[float, dict]]:
    return [(e.time(), orjson.loads(e.raw)) for e in TraceReader(path) if e.raw]


def stream_lines(client: redis.Redis) -> list[tuple[float, dict]]:
    out = []
    for _, raw in store.read_stream(client, CLUSTER):
        record = orjson.loads(raw)
        out.append((parse_time(record["observed"]), record))
    return out


def missing_versions(run: Run) -> set[tuple[str, str, int]]:
    """Pod and node versions the simulator wrote after the watchers first listed each kind
    that never reached the Redis stream."""
    seen = stream_lines(run.client)
    have = versions(seen)
    first_list = {}
    for kind in ("Pod", "Node"):
        listed = [v for k, _, v in have if k == kind]
        first_list[kind] = min(listed) if listed else 0
    # Everything the first list returned shares its rv floor: versions at or below the
    # newest object of that first batch were before the watch began.
    first_batch: dict[str, int] = {}
    stamp = {}
    for _, record in seen:
        obj = record.get("object") or {}
        kind = obj.get("kind")
        if kind in ("Pod", "Node") and kind not in stamp:
            stamp[kind] = record["observed"]
        if kind in stamp and record["observed"] == stamp[kind] and record["type"] == "ADDED":
            rv = int((obj.get("metadata") or {}).get("resourceVersion") or 0)
            first_batch[kind] = max(first_batch.get(kind, 0), rv)
    wanted = {
        (kind, uid, rv)
        for kind, uid, rv in versions(recorded_lines(run.recording))
        if rv > first_batch.get(kind, 0)
    }
    return wanted - have


def blind_intervals(client: redis.Redis) -> list[dict[str, str]]:
    return [orjson.loads(b) for b in client.lrange(store.blind_key(CLUSTER), 0, -1)]
