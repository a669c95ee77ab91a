"""The fault suite (issue 9): each fault injected into a real run — the served simulator
watched through the `kubernetes` client by real Celery workers into a real Redis — must
end with the fault-free run's verdicts (the simulator's own recording of the same seed),
lose no pod or node version (or record the blind interval it fell in), and leave the
stream's health saying what happened.

A SIGKILLed worker and a SIGTERMed one are covered in tests/ingest/test_end_to_end.py.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
import redis

from handoff import conf
from handoff.live import health, store
from tests.conftest import start_redis, stop, wait_until

from . import faultrun as fr

pytestmark = [pytest.mark.slow, pytest.mark.faults]


def _run(tmp_path: Path, client: redis.Redis, faults: list[dict]) -> tuple[fr.Run, dict]:
    run = fr.start(tmp_path, client, faults)
    try:
        views = fr.finish(run)
    finally:
        fr.stop_run(run)
    return run, views


def _same_verdicts(run: fr.Run, views: dict) -> None:
    assert len(views) >= 15
    assert fr.verdicts(views) == fr.verdicts(fr.offline(run.recording))


# Faults armed from virtual t = 40 s (4 s into the run), when pods are being handed over.
CASES = {
    "cut-watch": (
        [
            {"fault": "cut-watch", "resource": "pods", "after": 3, "count": 2, "at": 40},
            {"fault": "cut-watch", "resource": "nodes", "after": 1, "at": 60},
        ],
        "cut-watch",
        "ProtocolError",  # urllib3's IncompleteRead, mid-line
    ),
    "throttle-429": (
        # More than the client pool's own three retries, so the loop sees the 429.
        [{"fault": "throttle", "resource": "pods", "retry_after": 1, "count": 5, "at": 40}],
        "throttle",
        "HTTP 429",
    ),
    "error-500": (
        [{"fault": "error", "resource": "pods", "count": 4, "at": 40}],
        "error",
        "HTTP 500",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fault_costs_nothing(case: str, tmp_path: Path, redis_client: redis.Redis) -> None:
    faults, kind, error = CASES[case]
    run = fr.start(tmp_path, redis_client, faults)
    try:
        wait_until(lambda: run_injected(run, kind), 30, f"the {kind} fault")

        def reported() -> bool:
            return any(error in (run.stream(r).get("last_error") or "") for r in WATCHED)

        # Health says what happened while it happens...
        wait_until(reported, 15, f"the stream health to report {error}")
        views = fr.finish(run)
    finally:
        fr.stop_run(run)
    _same_verdicts(run, views)
    assert not fr.missing_versions(run)
    # ...and that it is over: no stream still counting failures.
    assert all(int(run.final_streams[r].get("failures") or 0) == 0 for r in WATCHED)


WATCHED = ("pods", "nodes", "events")


def run_injected(run: fr.Run, kind: str) -> int:
    return int(run.injected.get(kind, 0))


def test_a_stalled_watch_is_detected_within_the_read_timeout(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    faults = [{"fault": "stall-watch", "resource": "pods", "after": 0, "seconds": 60, "at": 40}]
    run = fr.start(tmp_path, redis_client, faults)
    try:
        wait_until(lambda: run.faults()["injected"].get("stall-watch"), 30, "the stall")
        stalled = time.time()
        wait_until(
            lambda: "ReadTimeout" in (run.stream("pods").get("last_error") or ""),
            15,
            "the watcher to notice the silent connection",
        )
        noticed = float(run.stream("pods")["error_at"]) - stalled
        views = fr.finish(run)
    finally:
        fr.stop_run(run)
    read_timeout = float(fr.FAST["HANDOFF_WATCH_READ_TIMEOUT"])
    assert noticed <= read_timeout + 1.5
    _same_verdicts(run, views)
    assert not fr.missing_versions(run)


def test_a_410_storm_relists_and_records_the_blind_interval(
    tmp_path: Path, redis_client: redis.Redis
) -> None:
    faults = [
        {"fault": "expire", "resource": "*", "count": 6, "at": 40},
        {"fault": "compact", "resource": "pods", "at": 90},
    ]
    run, views = _run(tmp_path, redis_client, faults)
    injected = run.injected
    assert injected.get("expire", 0) >= 3
    _same_verdicts(run, views)
    blind = fr.blind_intervals(redis_client)
    assert blind, "a relist after a 410 records the interval the watch was blind"
    assert run.stream("pods").get("relisted")
    # A version never delivered fell in a recorded blind interval of its stream.
    for kind, uid, rv in fr.missing_versions(run):
        resource = {"Pod": "pods", "Node": "nodes"}[kind]
        assert any(b["stream"] == resource for b in blind), (kind, uid, rv)


def test_redis_killed_and_restarted_mid_ingest_loses_nothing(tmp_path: Path) -> None:
    """A private redis-server with AOF (fsync always), SIGKILLed while events stream in,
    restarted on the same port and directory: workers and beat reconnect, the stream
    resumes from its checkpoint, and the verdicts are the fault-free run's."""
    directory = tmp_path / "redis"
    directory.mkdir()
    proc, url = _aof_redis(directory)
    client = redis.Redis.from_url(url)
    run = fr.start(tmp_path, client, None, redis_url=url)
    try:
        wait_until(lambda: client.xlen(store.events_key(fr.CLUSTER)) > 80, 30, "some events")
        before = client.xlen(store.events_key(fr.CLUSTER))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        time.sleep(2)  # the watchers meet a dead Redis
        proc, _ = _aof_redis(directory, port=int(url.rsplit(":", 1)[1].split("/")[0]))
        assert client.xlen(store.events_key(fr.CLUSTER)) >= before  # AOF kept them
        views = fr.finish(run)
        missing = fr.missing_versions(run)
        report = health.check_streams(client, time.time(), conf.stream_limits())
    finally:
        fr.stop_run(run)
        stop(proc)
    _same_verdicts(run, views)
    assert not missing
    assert all(s["ok"] for s in report[fr.CLUSTER].values()), report


def test_beat_down_for_a_minute(tmp_path: Path, redis_client: redis.Redis) -> None:
    """Streams hand over by themselves without beat; the heartbeat (a beat task) goes
    stale and /healthz says so; when beat is back, health recovers and verdicts match."""
    run = fr.start(tmp_path, redis_client, None, speed=1.5, duration=120)
    try:
        stop(run.beat)
        down = time.monotonic()
        wait_until(
            lambda: health.check_celery(redis_client, time.time(), 30)["ok"] is False,
            60,
            "the heartbeat to go stale",
        )
        assert fr.all_held(run), "streams keep running without beat"
        wait_until(lambda: time.monotonic() - down >= 60, 70, "a minute without beat")
        fr.restart_beat(run)
        wait_until(
            lambda: health.check_celery(redis_client, time.time(), 30)["ok"], 30, "heartbeat"
        )
        views = fr.finish(run)
    finally:
        fr.stop_run(run)
    _same_verdicts(run, views)
    assert not fr.missing_versions(run)


def _aof_redis(directory: Path, port: int | None = None):
    import shutil

    from tests.conftest import spawn

    if port is None:
        proc, url = start_redis(directory)  # a free port, then restart with AOF on it
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        stop(proc)
    argv = [shutil.which("redis-server") or "redis-server", "--port", str(port)]
    argv += ["--bind", "127.0.0.1", "--dir", str(directory), "--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no"]
    proc = spawn(argv, directory / "redis.log")
    client = redis.Redis(port=port)
    wait_until(lambda: _pings(client), 15, "the AOF redis-server")
    client.close()
    return proc, f"redis://127.0.0.1:{port}/0"


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
