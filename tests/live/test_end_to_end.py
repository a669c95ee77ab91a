"""The whole path with real processes: `simulate --serve` watched through the kubernetes
client by Celery workers (leases, beat's supervisor, hand-overs), folded into Redis.

The simulator starts paused and its clock is started once every watch has listed, so the
watchers see every pod from its creation however loaded the machine is. The fold in Redis
must judge every pod as the offline triage of the simulator's own recording does; `record`
of the cluster's stream, triaged offline and replayed into another cluster, must give the
very same timelines.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command

from devtools.devstack import free_port
from handoff.core.report import build_report
from handoff.live import leases, queries, store
from handoff.live.sources.playback import replay
from handoff.offline.triage import fold_file
from tests.conftest import python_env, spawn, stop, wait_until

from .helpers import fold_all, register, stable

SPEED = 10
DURATION = 180  # virtual seconds of manual-scheduling: 18 s of wall time at SPEED
STREAMS = ("pods", "nodes", "events", "fold")
WATCHED = ("pods", "nodes", "events")


@pytest.fixture
def fast_hand_overs(monkeypatch):
    """Short windows and leases, so hand-overs and take-overs happen inside a test."""
    for name, value in {
        "HANDOFF_WATCH_WINDOW": "8",
        "HANDOFF_WATCH_SERVER_TIMEOUT": "3",
        "HANDOFF_WATCH_READ_TIMEOUT": "10",
        "HANDOFF_LEASE_TTL": "3",
        "HANDOFF_SUPERVISE_INTERVAL": "1",
    }.items():
        monkeypatch.setenv(name, value)


@dataclass
class Simulator:
    proc: subprocess.Popen
    recording: Path
    address: str
    started: float | None = None  # time.monotonic() when its clock started: virtual t=0

    def start_clock(self, client) -> None:
        """Once every stream is held and each watch has its first list (all of virtual
        time 0), start the paused simulator's clock: however late the workers came, they
        see every pod from its creation."""
        wait_until(lambda: _all_held(client), 60, "every stream to be held")
        wait_until(lambda: _all_listed(client), 60, "every watch's first list")
        assert self.clock(b'{"running": true}')["running"] is True
        self.started = time.monotonic()

    def clock(self, body: bytes | None = None) -> dict:
        """GET (or with ``body`` POST) the simulator's /_sim/clock."""
        request = urllib.request.Request(f"{self.address}/_sim/clock", data=body)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return orjson.loads(answer.read())


@pytest.fixture
def simulator(tmp_path: Path, redis_client):
    """manual-scheduling served with its clock paused; the test starts it."""
    kubeconfig = tmp_path / "kubeconfig"
    recording = tmp_path / "sim.jsonl"
    port = free_port()
    argv = [sys.executable, "manage.py", "simulate", "--scenario", "manual-scheduling"]
    argv += ["--seed", "3", "--speed", str(SPEED), "--duration", str(DURATION)]
    argv += ["--serve", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig), "--paused"]
    argv += ["--record", str(recording)]
    proc = spawn(argv, tmp_path / "simulator.log", python_env())
    wait_until(kubeconfig.exists, 30, "the simulator's kubeconfig")
    register(redis_client, "sim", "kubeconfig", kubeconfig=str(kubeconfig))
    sim = Simulator(proc, recording, f"http://127.0.0.1:{port}")
    yield sim
    if proc.poll() is None:
        stop(proc)


def _beat(tmp_path: Path):
    argv = [sys.executable, "-m", "celery", "-A", "handoff", "beat", "-l", "info"]
    argv += ["-s", str(tmp_path / "beat-schedule")]
    return spawn(argv, tmp_path / "beat.log", python_env(HANDOFF_RUN_DIR=str(tmp_path)))


def _all_held(client) -> bool:
    return all(leases.holder(client, "sim", s) for s in STREAMS)


def _all_listed(client) -> bool:
    return all(store.stream_state(client, "sim", r).get("rv") for r in WATCHED)


def _settled(client) -> bool:
    """The stream has been quiet for a while and the fold has caught up with it."""
    last = client.xrevrange(store.events_key("sim"), count=1)
    if not last:
        return False
    quiet = time.time() - store.stream_id_key(last[0][0])[0] / 1000 > 2.0
    return quiet and store.fold_state(client, "sim").get("cursor") == last[0][0].decode()


def _finish(simulator: Simulator, client) -> dict:
    started = simulator.started
    assert started is not None, "the simulator's clock was never started"
    wait_until(lambda: time.monotonic() - started > DURATION / SPEED + 1, 60, "the run's end")
    wait_until(lambda: simulator.clock()["elapsed"] >= DURATION, 30, "the virtual end")
    wait_until(lambda: _settled(client), 60, "the fold to catch up")
    simulator.proc.send_signal(signal.SIGTERM)  # flushes the simulator's own recording
    simulator.proc.wait(timeout=20)
    return queries.pod_views(client, "sim")


def _group(pgid: int) -> set[int]:
    """The processes of a process group (a worker and its pool), from /proc."""
    pids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.add(int(stat.parent.name))
    return pids


def _verdicts(views) -> dict:
    items = views.values() if isinstance(views, dict) else views
    return {(v["namespace"], v["name"], v["uid"]): (v["verdict"], v["reason"]) for v in items}


def _offline(path: Path) -> list[dict]:
    timeline, _ = fold_file(path)
    return build_report(timeline)["pods"]


def _record(tmp_path: Path) -> Path:
    out = tmp_path / "recorded.jsonl.gz"
    call_command("record", "sim", "--out", str(out), stdout=io.StringIO())
    return out


@pytest.mark.slow
def test_it_ends_with_the_verdicts_of_the_simulators_recording(
    fast_hand_overs, simulator, celery_worker, redis_client, tmp_path
):
    celery_worker(concurrency=5)
    beat = _beat(tmp_path)
    try:
        simulator.start_clock(redis_client)
        views = _finish(simulator, redis_client)
    finally:
        stop(beat)
    assert len(views) >= 15
    assert _verdicts(views) == _verdicts(_offline(simulator.recording))
    # The stream host's watches wrote to the stream.
    assert int(store.stream_state(redis_client, "sim", "pods")["events"]) > 0

    # `record` the live stream: offline triage and a replay give the same timelines.
    recorded = _record(tmp_path)
    assert stable(_offline(recorded)) == stable(views)
    register(redis_client, "copy")
    replay(redis_client, "copy", recorded)
    fold_all(redis_client, "copy")
    assert stable(queries.pod_views(redis_client, "copy")) == stable(views)

    out = io.StringIO()
    call_command("triage", "--cluster", "sim", "--format", "json", stdout=out)
    live = orjson.loads(out.getvalue())
    assert _verdicts(live["pods"]) == _verdicts(views)


@pytest.mark.slow
@pytest.mark.faults
def test_a_killed_worker_is_replaced_within_15_seconds(
    fast_hand_overs, simulator, celery_worker, redis_client, tmp_path
):
    first = celery_worker(concurrency=5)
    beat = _beat(tmp_path)
    try:
        simulator.start_clock(redis_client)
        second = celery_worker(concurrency=5)
        time.sleep(1)
        dead = _group(first.pid)
        before = [leases.holder(redis_client, "sim", s) for s in STREAMS]
        os.killpg(first.pid, signal.SIGKILL)
        killed = time.monotonic()

        def taken_over() -> bool:
            holders = [leases.holder(redis_client, "sim", s) for s in STREAMS]
            return all(h and int(h.split(":")[1]) not in dead for h in holders)

        wait_until(taken_over, 15, "the second worker to take every stream over")
        took = time.monotonic() - killed
        views = _finish(simulator, redis_client)
        assert dead & {int(h.split(":")[1]) for h in before if h}
    finally:
        stop(beat)
    del second
    assert took < 15
    assert _verdicts(views) == _verdicts(_offline(simulator.recording))
    assert stable(_offline(_record(tmp_path))) == stable(views)


@pytest.mark.slow
@pytest.mark.faults
def test_a_worker_told_to_stop_hands_its_streams_over_at_once(
    simulator, celery_worker, redis_client, monkeypatch
):
    """SIGTERM (warm shutdown) to a worker whose tasks would run for 5 minutes under
    30-second leases: it checkpoints, releases and enqueues successors, so another worker
    holds every stream within seconds, long before a lease could lapse; no beat runs."""
    for name, value in {
        "HANDOFF_WATCH_WINDOW": "300",
        "HANDOFF_WATCH_SERVER_TIMEOUT": "60",
        "HANDOFF_WATCH_READ_TIMEOUT": "90",
        "HANDOFF_LEASE_TTL": "30",
    }.items():
        monkeypatch.setenv(name, value)
    first = celery_worker(concurrency=5)
    from handoff.tasks import start_stream

    for stream in STREAMS:
        start_stream("sim", stream)
    simulator.start_clock(redis_client)
    time.sleep(2)
    second = celery_worker(concurrency=5)
    dead = _group(first.pid)
    first.send_signal(signal.SIGTERM)  # the main process only, as `docker stop` does
    told = time.monotonic()

    def handed_over() -> bool:
        holders = [leases.holder(redis_client, "sim", s) for s in STREAMS]
        return all(h and int(h.split(":")[1]) not in dead for h in holders)

    wait_until(handed_over, 20, "the second worker to hold every stream")
    took = time.monotonic() - told
    first.wait(timeout=20)
    exited = time.monotonic() - told
    views = _finish(simulator, redis_client)
    del second
    assert took < 10  # a lapsed lease would take 30 s
    assert exited < 20  # not the 300 s window
    assert _verdicts(views) == _verdicts(_offline(simulator.recording))
