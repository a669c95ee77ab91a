"""Benchmarks, each measured beside its baseline in the same run so the ratio
holds on a noisy machine. ``manage.py bench`` runs them; docs/benchmarks.md
records the figures.

Figures so far: the fold (against the orjson parse floor and against the
kubernetes client's typed deserialisation, what a quick script does), the
fold's memory per pod, offline triage of a whole trace (seconds and peak RSS),
and the simulator's own event rate.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import multiprocessing
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis

from devtools.devstack import free_port, group_members, port_open, start_time, stop_groups
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader, format_time, open_binary
from handoff.live import clusters, store
from handoff.live.sources.sink import StreamSink

TYPED_MODELS = {
    ("v1", "Pod"): "V1Pod",
    ("v1", "Node"): "V1Node",
    ("v1", "Event"): "CoreV1Event",
    ("events.k8s.io/v1", "Event"): "EventsV1Event",
}


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


@dataclass
class Results:
    machine: dict[str, Any]
    command: str
    trace: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    # Curves for the figures: name -> points (throughput vs trace size, latency vs rate).
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model or platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _scale_argv(nodes: int, pods: int, churn: float, duration: float) -> list[str]:
    return [
        sys.executable,
        "manage.py",
        "simulate",
        "--scenario",
        "scale",
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--churn",
        str(churn),
        "--duration",
        str(duration),
    ]


def record_scale_trace(out: Path, nodes: int, pods: int, churn: float, duration: float) -> float:
    """Run the simulator's ``scale`` scenario into ``out``; returns wall seconds."""
    start = time.perf_counter()
    argv = [*_scale_argv(nodes, pods, churn, duration), "--record", str(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def simulate_without_recording(
    nodes: int, pods: int, churn: float, duration: float
) -> tuple[int, float]:
    """The ``scale`` scenario flat out with nothing written: (watch events the API server's
    fan-out delivered, seconds of the run loop), as ``simulate`` reports them."""
    out = subprocess.run(
        [*_scale_argv(nodes, pods, churn, duration), "--speed", "max"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = re.search(r"in ([\d.]+) s wall, \d+ trace lines .*?, (\d+) API changes", out)
    if found is None:
        raise RuntimeError(f"unexpected simulate output: {out[-500:]}")
    return int(found.group(2)), float(found.group(1))


def count_lines(path: Path) -> int:
    with open_binary(path) as stream:
        return sum(1 for _ in stream)


def parse_floor(path: Path) -> float:
    """Seconds to read and orjson-parse every line: nothing can fold faster."""
    start = time.perf_counter()
    with open_binary(path) as stream:
        for line in stream:
            orjson.loads(line)
    return time.perf_counter() - start


def fold_seconds(path: Path) -> tuple[float, int]:
    """Seconds to read and fold the whole trace, and the pods it held."""
    gc.collect()
    start = time.perf_counter()
    timeline = fold(TraceReader(path))
    seconds = time.perf_counter() - start
    pods = len(timeline.pods)
    del timeline
    gc.collect()
    return seconds, pods


class _Response:
    """What ``ApiClient.deserialize`` reads: the raw body in ``data``."""

    def __init__(self, data: bytes) -> None:
        self.data = data


def typed_seconds(path: Path, limit: int) -> tuple[float, int, int]:
    """The naive approach: the kubernetes client's typed models for each object,
    as ``watch.stream`` without ``_preload_content=False`` does."""
    from kubernetes.client import ApiClient

    client = ApiClient()
    done = refused = 0
    start = time.perf_counter()
    with open_binary(path) as stream:
        for line in stream:
            record = json.loads(line)
            obj = record.get("object") if isinstance(record, dict) else None
            if not isinstance(obj, dict):
                continue
            model = TYPED_MODELS.get((obj.get("apiVersion"), obj.get("kind")))
            if model is not None:
                try:
                    client.deserialize(_Response(json.dumps(obj)), model)
                except ValueError:
                    refused += 1  # the typed models reject objects missing "required" fields
            done += 1
            if done >= limit:
                break
    return time.perf_counter() - start, done, refused


def memory_per_pod(path: Path, max_lines: int) -> tuple[float, int]:
    """Bytes the folded state holds per pod (tracemalloc over a sample)."""
    gc.collect()
    tracemalloc.start()
    reader = TraceReader(path)
    timeline = fold(line for number, line in enumerate(reader) if number < max_lines)
    held, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    pods = max(1, len(timeline.pods))
    return held / pods, pods


def triage_run(path: Path) -> tuple[float, float]:
    """``manage.py triage --format json`` of the whole trace: seconds, peak RSS in MiB."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "triage", "--trace", str(path), "--format", "json"],
        stdout=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"triage exited with {proc.returncode}")
    return seconds, usage.ru_maxrss / 1024


def run_fold_benchmarks(results: Results, trace: Path, typed_limit: int, memory_lines: int) -> None:
    lines = count_lines(trace)
    results.trace.update({"path": str(trace), "lines": lines, "bytes": trace.stat().st_size})
    floor = parse_floor(trace)
    folded, pods = fold_seconds(trace)
    results.trace["pods"] = pods
    typed, typed_lines, refused = typed_seconds(trace, typed_limit)
    fold_rate, floor_rate, typed_rate = lines / folded, lines / floor, typed_lines / typed
    results.add(
        Figure(
            "fold: read + fold",
            round(fold_rate),
            "events/s",
            "orjson parse floor",
            round(floor_rate),
            round(folded / floor, 2),
            "≥ 100k events/s; within 2x of the parse floor",
            fold_rate >= 100_000 and folded / floor <= 2,
            f"{1e6 * folded / lines:.1f} µs/event over {lines} events",
        )
    )
    results.add(
        Figure(
            "fold vs typed client",
            round(fold_rate),
            "events/s",
            "kubernetes client typed models",
            round(typed_rate),
            round(fold_rate / typed_rate, 1),
            "≥ 8x the typed client",
            fold_rate / typed_rate >= 8,
            f"typed baseline over the first {typed_lines} events"
            + (f" ({refused} objects refused by the typed models)" if refused else ""),
        )
    )
    per_pod, sample_pods = memory_per_pod(trace, memory_lines)
    results.add(
        Figure(
            "fold memory per pod",
            round(per_pod),
            "bytes",
            target="about 1 KB (≤ 1.25 KB)",
            met=per_pod <= 1280,
            note=f"tracemalloc over {sample_pods} pods",
        )
    )
    seconds, rss = triage_run(trace)
    per_million = seconds * 1_000_000 / lines
    results.add(
        Figure(
            "offline triage of the trace",
            round(seconds, 1),
            "s",
            target="1M events ≤ 20 s",
            met=per_million <= 20,
            note=f"{lines} events ({per_million:.0f} s per 1M events), peak RSS {rss:.0f} MiB",
        )
    )


def markdown(results: Results) -> str:
    rows = [
        "| figure | value | baseline | ratio | target | met | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in results.figures:
        baseline = f"{f.baseline}: {f.baseline_value:,}" if f.baseline_value is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "**no**")
        ratio = "" if f.ratio is None else f"{f.ratio}x"
        rows.append(
            f"| {f.name} | {f.value:,} {f.unit} | {baseline} | {ratio} | {f.target} | {met} "
            f"| {f.note} |"
        )
    m = results.machine
    head = (
        f"Machine: {m['cores']} cores, {m['cpu']}, Python {m['python']}.  \n"
        f"Command: `{results.command}`.  \n"
        f"Trace: {results.trace.get('lines', 0):,} events, {results.trace.get('pods', 0):,} pods."
    )
    return head + "\n\n" + "\n".join(rows) + "\n"


def to_json(results: Results) -> str:
    return json.dumps(asdict(results), indent=2)


# ------------------------------------------------------------------ services


class Services:
    """The real processes the live figures need, started once per run and stopped at the
    end: a private redis-server, and (for latency) a migrated SQLite database with a
    signed-in session, a Celery worker on the ``watch`` queue, and Daphne."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self.named: dict[str, subprocess.Popen] = {}
        self._redis_url: str | None = None
        self.env: dict[str, str] = {}

    def redis_url(self) -> str:
        if self._redis_url is None:
            binary = shutil.which("redis-server")
            if binary is None:
                raise RuntimeError("redis-server not found (Debian: apt-get install redis-server)")
            port = free_port()
            data = self.workdir / "redis"
            data.mkdir(parents=True, exist_ok=True)
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data)]
            argv += ["--save", "", "--appendonly", "no"]
            self._spawn(argv, "redis")
            self._wait(lambda: port_open(port), "redis-server")
            self._redis_url = f"redis://127.0.0.1:{port}/0"
            run_dir = self.workdir / "run"
            run_dir.mkdir(exist_ok=True)
            self.env = {
                **os.environ,
                "REDIS_URL": self._redis_url,
                "DATABASE_URL": f"sqlite:///{self.workdir / 'bench.sqlite3'}",
                "HANDOFF_RUN_DIR": str(run_dir),
                "HANDOFF_DEMO": "0",
                "ALLOWED_HOSTS": "127.0.0.1",
                "DJANGO_SETTINGS_MODULE": "handoff.settings",
                "PYTHONUNBUFFERED": "1",
            }
        return self._redis_url

    def session_cookie(self) -> str:
        """A signed-in session of a fresh user in the bench's own database."""
        self.redis_url()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            env=self.env,
            check=True,
        )
        script = (
            "from django.contrib.auth import get_user_model, SESSION_KEY, BACKEND_SESSION_KEY,"
            " HASH_SESSION_KEY\n"
            "from django.contrib.sessions.backends.db import SessionStore\n"
            "User = get_user_model()\n"
            "u = User.objects.filter(username='bench').first() or "
            "User.objects.create_user('bench', password=None)\n"
            "s = SessionStore()\n"
            "s[SESSION_KEY] = str(u.pk)\n"
            "s[BACKEND_SESSION_KEY] = 'django.contrib.auth.backends.ModelBackend'\n"
            "s[HASH_SESSION_KEY] = u.get_session_auth_hash()\n"
            "s.create()\n"
            "print(s.session_key)\n"
        )
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.strip().splitlines()[-1]

    def worker(self) -> None:
        argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", "watch"]
        argv += ["-c", "1", "-n", "bench@%h", "-l", "warning", "--without-gossip"]
        argv += ["--without-mingle"]
        self._spawn(argv, "worker")

    def daphne(self) -> str:
        port = free_port()
        argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
        self._spawn([*argv, "handoff.asgi:application"], "daphne")
        self._wait(lambda: port_open(port), "daphne")
        return f"127.0.0.1:{port}"

    def _spawn(self, argv: list[str], name: str) -> None:
        with open(self.workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                argv,
                env=self.env or None,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append(proc)
        self.named[name] = proc

    def live_stack(self, cluster: str) -> tuple[redis.Redis, str, str]:
        """An empty Redis holding one registered trace cluster whose fold task runs in a
        Celery worker, and Daphne with a signed-in session: (client, cookie, address)."""
        url = self.redis_url()
        cookie = self.session_cookie()
        client = redis.Redis.from_url(url)
        client.flushall()
        clusters.register_cluster(client, clusters.ClusterConfig(name=cluster, kind="trace"))
        self.worker()
        address = self.daphne()
        from celery import Celery

        Celery(broker=url).send_task("handoff.tasks.fold", args=[cluster], queue="watch")
        fold_lease = store.lease_key(cluster, clusters.FOLD)
        self._wait(lambda: client.exists(fold_lease), "the fold task", 60)
        return client, cookie, address

    def cpu_seconds(self, name: str) -> float:
        """CPU time used so far by a started service and its children (its process group):
        what it costs, whatever else the machine is doing."""
        proc = self.named[name]
        total = 0
        for pid in group_members(proc.pid, start_time(proc.pid) or 0):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / os.sysconf("SC_CLK_TCK")

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{what} did not start; see {self.workdir}/*.log")

    def stop(self) -> None:
        groups = [(p.pid, start_time(p.pid) or 0) for p in self.procs if p.poll() is None]
        stop_groups(groups, 10)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.procs.clear()


# -------------------------------------------------------------------- ingest


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
    views_bytes = sum(sizes)
    pods = int(client.hlen(store.pods_key(cluster)))
    snapshot = int(client.memory_usage(store.snapshot_key(cluster), samples=0) or 0)
    client.close()
    delta = after - before - snapshot
    return IngestRun(
        lines, replay_s, fold_s, pods, progress, views_bytes, delta, fold_cpu_s, sizes[0]
    )


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
    info_per_pod = run.used_delta / max(1, run.pods)
    results.add(
        Figure(
            "ingest: Redis memory per pod",
            round(per_pod),
            "bytes",
            target="≤ 2 KB per pod",
            met=per_pod <= 2048,
            note=f"MEMORY USAGE of pod views + indexes over {run.pods} pods (views "
            f"{run.pods_hash_bytes / max(1, run.pods):,.0f} B/pod, the change index and the "
            f"other indexes {(run.views_bytes - run.pods_hash_bytes) / max(1, run.pods):,.0f}); "
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


# ------------------------------------------------------------------- latency

LATENCY_CLUSTER = "latency"


def _pod(cluster: str, n: int, stamp: str) -> dict[str, Any]:
    """A pod as a watch shows it once its kubelet reports it running (most pods of a
    busy cluster are: a pod whose verdict can still change with time alone would also be
    re-judged by every sweep)."""
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": f"p{n}",
            "namespace": "bench",
            "uid": f"{cluster}-{n}",
            "resourceVersion": str(n + 1),
            "creationTimestamp": stamp,
        },
        "spec": {"nodeName": f"node-{n % 50}", "containers": [{"name": "c", "image": "x"}]},
        "status": {
            "phase": "Running",
            "startTime": stamp,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp},
                {"type": "Initialized", "status": "True", "lastTransitionTime": stamp},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": stamp},
                {"type": "Ready", "status": "True", "lastTransitionTime": stamp},
            ],
            "containerStatuses": [
                {"name": "c", "ready": True, "started": True, "restartCount": 0,
                 "state": {"running": {"startedAt": stamp}}}
            ],
        },
    }  # fmt: skip


class Feeder:
    """Plays a watcher at a steady rate: each tick hands the pods created since the last one
    to a ``StreamSink`` (as a watch task writes what it read), stamped with the time they
    were handed over; ``sent`` keeps that time per pod name."""

    def __init__(self, url: str, cluster: str, tick: float = 0.005) -> None:
        self.client = redis.Redis.from_url(url)
        self.sink = StreamSink(self.client, cluster, "pods")
        self.cluster = cluster
        self.tick = tick
        self.sent: dict[str, float] = {}
        self.next = 0

    def run(self, rate: float, seconds: float) -> None:
        """Hand over ``rate * seconds`` pods, evenly over ``seconds``."""
        total = int(rate * seconds)
        start = time.monotonic()
        done = 0
        while done < total:
            due = min(total, int((time.monotonic() - start) * rate))
            if due > done:
                self._write(due - done)
                done = due
            time.sleep(self.tick)

    def _write(self, count: int) -> None:
        now = time.time()
        stamp = format_time(now)
        batch = [
            ("ADDED", _pod(self.cluster, n, stamp)) for n in range(self.next, self.next + count)
        ]
        self.sink.write(batch, observed=now)
        for _, obj in batch:
            self.sent[obj["metadata"]["name"]] = now
        self.next += count


class _Arrivals:
    """When each pod first arrived. A message names its pods, or (a burst of more than
    ``push.MAX_ROWS``) is a refresh hint, on which a browser reloads: then every pod
    stored by now counts as arrived (pods are fed in order, so they are p0..p{HLEN-1};
    the reload's own API round trip is not included)."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.seen: dict[str, float] = {}
        self.stored = 0

    def note(self, data: dict[str, Any], now: float) -> None:
        if data.get("refresh"):
            count = int(self.client.hlen(store.pods_key(LATENCY_CLUSTER)))
            for n in range(self.stored, count):
                self.seen.setdefault(f"p{n}", now)
            self.stored = max(self.stored, count)
        for pod in data.get("pods") or []:
            self.seen.setdefault(pod["name"], now)


async def _websocket_client(
    ws_address: str, cookie: str, seen: _Arrivals, ready: Any, stop: Any
) -> None:
    """A browser's part: signed in to Daphne, noting when each pod first arrives."""
    import aiohttp

    headers = {"Origin": f"http://{ws_address}", "Cookie": f"sessionid={cookie}"}
    async with (
        aiohttp.ClientSession() as session,
        session.ws_connect(
            f"ws://{ws_address}/ws/clusters/{LATENCY_CLUSTER}/", headers=headers, max_msg_size=0
        ) as ws,
    ):
        hello = await ws.receive_json(timeout=30)
        if hello.get("type") != "hello":
            raise RuntimeError(f"websocket refused: {hello}")
        ready.set()
        while not stop.is_set():
            try:
                frame = await ws.receive(timeout=0.2)
            except TimeoutError:
                continue
            if frame.type != aiohttp.WSMsgType.TEXT:
                break
            now = time.time()
            message = orjson.loads(frame.data)
            if message.get("type") == "cluster.update":
                seen.note(message["data"], now)


async def _group_member(url: str, seen: _Arrivals, ready: Any, stop: Any) -> None:
    """A plain member of the cluster's Channels group, noting when each pod first
    arrives."""
    from channels_redis.core import RedisChannelLayer

    from handoff.live.push import cluster_group

    layer = RedisChannelLayer(hosts=[url])
    channel = await layer.new_channel()
    await layer.group_add(cluster_group(LATENCY_CLUSTER), channel)

    async def receive() -> None:
        while True:
            message = await layer.receive(channel)
            seen.note(message["data"], time.time())

    task = asyncio.ensure_future(receive())
    ready.set()
    while not stop.is_set():
        await asyncio.sleep(0.2)
    task.cancel()


def _listener(
    kind: str, url: str, address: str, cookie: str, ready: Any, stop: Any, out: str
) -> None:
    """One listener, in a process of its own (so neither waits for the GIL behind the
    other); writes what it saw to ``out`` when told to stop."""
    seen = _Arrivals(url)
    if kind == "websocket":
        asyncio.run(_websocket_client(address, cookie, seen, ready, stop))
    else:
        asyncio.run(_group_member(url, seen, ready, stop))
    Path(out).write_bytes(orjson.dumps({kind: seen.seen}))


def _feed(url: str, rate: float, seconds: float, first: int, out: str) -> None:
    feeder = Feeder(url, LATENCY_CLUSTER)
    feeder.next = first
    feeder.run(rate, seconds)
    Path(out).write_bytes(orjson.dumps(feeder.sent))


def _feed_elsewhere(
    url: str, rate: float, seconds: float, first: int, workdir: Path
) -> dict[str, float]:
    """Run the feeder in a process of its own, so the clients measuring here never wait
    for the GIL behind it; returns when each pod was handed over."""
    out = workdir / "sent.json"
    context = multiprocessing.get_context("spawn")
    proc = context.Process(target=_feed, args=(url, rate, seconds, first, str(out)))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"the feeder failed with exit code {proc.exitcode}")
    return orjson.loads(out.read_bytes())


def _caught_up(client: redis.Redis, cluster: str, timeout: float) -> None:
    """Wait until the fold has folded the stream's last entry (or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        last = client.xrevrange(store.events_key(cluster), count=1)
        if not last or store.fold_state(client, cluster).get("cursor") == last[0][0].decode():
            return
        time.sleep(0.1)


def _percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    if not ordered:
        return {"p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan"), "n": 0}

    def at(q: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": at(1.0), "n": len(ordered)}


LATENCY_SNAPSHOT_INTERVAL = 10  # seconds, for the latency figures' fold worker


def live_latency(
    services: Services, rates: list[int], seconds: float, warmup: float = 1.0
) -> list[dict[str, Any]]:
    """Watch event handed to the sink → pod in a websocket frame from Daphne, and → pod in
    a Channels group message, at each rate, through a real fold task in a Celery worker."""
    url = services.redis_url()
    # The fold worker's periodic snapshot falls inside the measurement, every 10 s
    # instead of 60 s, so the tail shows whether it holds the live path up.
    services.env["HANDOFF_SNAPSHOT_INTERVAL"] = str(LATENCY_SNAPSHOT_INTERVAL)
    client, cookie, address = services.live_stack(LATENCY_CLUSTER)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    listeners = []
    for kind in ("websocket", "group"):
        ready = context.Event()
        out = services.workdir / f"seen-{kind}.json"
        proc = context.Process(
            target=_listener, args=(kind, url, address, cookie, ready, stop, str(out))
        )
        proc.start()
        if not ready.wait(60):
            raise RuntimeError(f"the {kind} listener did not connect")
        listeners.append((proc, out))
    spans = []
    first = 0
    for rate in rates:
        cpu = {name: services.cpu_seconds(name) for name in ("worker", "daphne")}
        sent = _feed_elsewhere(url, rate, seconds, first, services.workdir)
        _caught_up(client, LATENCY_CLUSTER, timeout=60)
        time.sleep(1.0)  # let the last pods through Daphne
        # CPU per 1,000 pods: the rate one core could sustain, on any machine load.
        cost = {
            name: round(1000 * (services.cpu_seconds(name) - before) / max(1, len(sent)), 3)
            for name, before in cpu.items()
        }
        spans.append((rate, first, sent, cost))
        first += len(sent)
    stop.set()
    seen: dict[str, dict[str, float]] = {}
    for proc, out in listeners:
        proc.join(timeout=30)
        for kind, times in orjson.loads(out.read_bytes()).items():
            if times:
                seen[kind] = times
    rows = []
    for rate, first, sent, cost in spans:
        names = [f"p{n}" for n in range(first, first + len(sent))]
        measured = names[int(warmup * rate) :]
        row: dict[str, Any] = {"rate": rate, "events": len(names), "seconds": seconds}
        row["cpu_s_per_1k_pods"] = cost
        for path in ("websocket", "group"):
            times = seen.get(path, {})
            lost = sum(1 for name in measured if name not in times)
            stats = _percentiles([times[n] - sent[n] for n in measured if n in times])
            row[path] = {**stats, "missing": lost}
        rows.append(row)
    client.close()
    return rows


def run_latency_benchmarks(
    results: Results, services: Services, rates: list[int], seconds: float
) -> None:
    rows = live_latency(services, rates, seconds)
    results.series["live latency"] = rows
    for row in rows:
        ws, group = row["websocket"], row["group"]
        missing = f"; {ws['missing']} pods never arrived" if ws["missing"] else ""
        cost = row["cpu_s_per_1k_pods"]
        missing += f"; CPU per 1k pods: fold worker {cost['worker']} s, Daphne {cost['daphne']} s"
        if row["rate"] in (1000, 5000) or row["rate"] == max(rates):
            target = "p99 ≤ 250 ms at 5k events/s" if row["rate"] == 5000 else ""
            results.add(
                Figure(
                    f"live: observed → websocket frame at {row['rate']:,} events/s",
                    ws["p99_ms"],
                    "ms p99",
                    target=target,
                    met=(ws["p99_ms"] <= 250 and not ws["missing"]) if target else None,
                    note=f"p50 {ws['p50_ms']} ms, max {ws['max_ms']} ms over {ws['n']} pods "
                    f"({row['seconds']:.0f} s, first second dropped; a fold snapshot every "
                    f"{LATENCY_SNAPSHOT_INTERVAL} s){missing}",
                )
            )
        if row["rate"] == 2000:
            results.add(
                Figure(
                    "live: observed → Channels group message at 2,000 events/s",
                    group["p99_ms"],
                    "ms p99",
                    target="p99 ≤ 100 ms at 2k events/s",
                    met=group["p99_ms"] <= 100 and not group["missing"],
                    note=f"p50 {group['p50_ms']} ms, max {group['max_ms']} ms "
                    f"over {group['n']} pods",
                )
            )


# ------------------------------------------------------------------- figures


def write_figures(results: Results, out_dir: Path, stem: str = "benchmarks") -> list[Path]:
    """Plotly figures of the curves, as HTML (plotly.js once, beside them) and PNG (the
    HTML rendered by headless Chromium: nothing to download)."""
    import plotly.graph_objects as go

    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    ingest_points = results.series.get("ingest throughput")
    if ingest_points:
        fig = go.Figure(
            go.Scatter(
                x=[p["events"] for p in ingest_points],
                y=[p["events_per_s"] for p in ingest_points],
                mode="lines+markers",
                name="fold worker (stream → views, indexes, push)",
            )
        )
        fig.add_hline(y=20_000, line_dash="dash", annotation_text="target 20k events/s")
        fig.update_layout(
            title="Ingest throughput vs events folded so far (one worker process)",
            xaxis_title="events folded",
            yaxis_title="events/s (cumulative)",
        )
        figures["throughput"] = fig
    latency_rows = results.series.get("live latency")
    if latency_rows:
        fig = go.Figure()
        rates = [row["rate"] for row in latency_rows]
        for path, label in (("websocket", "→ websocket frame"), ("group", "→ Channels group")):
            for q, dash in (("p50_ms", "dot"), ("p99_ms", "solid")):
                fig.add_trace(
                    go.Scatter(
                        x=rates,
                        y=[row[path][q] for row in latency_rows],
                        mode="lines+markers",
                        line_dash=dash,
                        name=f"{label} {q[:3]}",
                    )
                )
        # Targets as traces: add_hline misplaces lines on a log axis.
        for y, label in (
            (250, "target: websocket p99 at 5k/s"),
            (100, "target: group p99 at 2k/s"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=[min(rates), max(rates)],
                    y=[y, y],
                    mode="lines",
                    line={"dash": "dash", "color": "black", "width": 1},
                    name=label,
                )
            )
        fig.update_layout(
            title="Live latency: watch event observed → delivered",
            xaxis_title="events/s (each a new pod)",
            yaxis_title="ms (log scale)",
            yaxis_type="log",
        )
        figures["latency"] = fig
    written = []
    for name, fig in figures.items():
        html = out_dir / f"{stem}-{name}.html"
        fig.write_html(html, include_plotlyjs="directory", full_html=True)
        written.append(html)
    if written:
        written += _screenshots(written)
    return written


def _screenshots(pages: list[Path]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 600})
        for html in pages:
            page.goto(html.resolve().as_uri())
            page.wait_for_selector(".main-svg")
            png = html.with_suffix(".png")
            page.screenshot(path=str(png))
            out.append(png)
        browser.close()
    return out
