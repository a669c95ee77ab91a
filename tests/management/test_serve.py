"""`manage.py serve`: several real Daphne processes on one listening socket, stopped together."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from devtools.devstack import free_port
from tests.conftest import BASE_DIR, answers, python_env, spawn, stop, wait_until


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def daphnes(pid: int) -> list[int]:
    """The Daphne children (the others: the answer builder)."""
    return [child for child in children(pid) if b"daphne" in command(child)]


def builders(pid: int) -> list[int]:
    return [child for child in children(pid) if b"answers" in command(child)]


def niceness(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


def command(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def sockets(pid: int) -> set[str]:
    held = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:"):
            held.add(target)
    return held


@pytest.fixture
def serve(tmp_path: Path, redis_url: str):
    port = free_port()
    argv = [sys.executable, str(BASE_DIR / "manage.py"), "serve", "-p", str(port)]
    proc = spawn([*argv, "--processes", "2"], tmp_path / "serve.log", python_env())
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        wait_until(
            lambda: answers(url) and len(daphnes(proc.pid)) == 2 and builders(proc.pid), 30, "serve"
        )
        yield proc, url
    finally:
        if proc.poll() is None:
            stop(proc)


def test_two_daphne_processes_share_one_listening_socket(serve):
    proc, url = serve
    first, second = daphnes(proc.pid)
    assert sockets(first) & sockets(second)  # the one socket the parent opened
    os.kill(first, signal.SIGSTOP)  # one process cannot accept: the other answers
    try:
        for _ in range(5):
            assert answers(url)
    finally:
        os.kill(first, signal.SIGCONT)


def test_the_answer_builder_runs_beside_them(serve, redis_client):
    from handoff.live import answers as shared_answers

    proc, _ = serve
    assert len(builders(proc.pid)) == 1
    wait_until(lambda: redis_client.exists(shared_answers.BUILDER_KEY), 20, "its heartbeat")


def autogroup(pid: int) -> str:
    """``/autogroup-N nice K``; empty for a process whose session has no group of its own
    (the init session's, as a CI runner's may be, or one in a cgroup of its own)."""
    return Path(f"/proc/{pid}/autogroup").read_text().strip()


def session_nice(pid: int) -> int:
    return int(autogroup(pid).split()[-1])


@pytest.mark.skipif(
    not Path("/proc/self/autogroup").exists(),
    reason="a kernel built without CONFIG_SCHED_AUTOGROUP has no session group to weigh",
)
def test_the_web_yields_its_cores_while_a_fold_is_behind_and_only_then(serve, redis_client):
    """serve leads its session (spawn starts one): the session, which the kernel weighs
    against the worker's and Redis's, goes to HANDOFF_WEB_NICE while a running fold is
    more than a second behind its stream, and back to 0 once it has caught up."""
    from django.conf import settings

    from handoff.live import clusters, store

    proc, _ = serve
    started = children(proc.pid)  # the Daphne processes and the answer builder
    groups = {Path(f"/proc/{pid}/autogroup").read_text().split()[0] for pid in started}
    assert groups == {Path(f"/proc/{proc.pid}/autogroup").read_text().split()[0]}
    assert [niceness(pid) for pid in started] == [niceness(os.getpid())] * 3  # never lowered
    assert session_nice(proc.pid) == 0
    ours = autogroup(os.getpid())

    clusters.register_cluster(redis_client, clusters.ClusterConfig(name="c", kind="trace"))
    redis_client.set(store.lease_key("c", clusters.FOLD), "host", ex=60)
    written = int((time.time() - 3) * 1000)
    redis_client.xadd(store.events_key("c"), {"e": "{}"}, id=f"{written}-0")
    wait_until(lambda: session_nice(proc.pid) == settings.HANDOFF_WEB_NICE, 10, "yielding")
    assert autogroup(os.getpid()) == ours  # the test run's own session untouched

    redis_client.hset(store.fold_key("c"), "cursor", f"{written}-0")  # caught up
    wait_until(lambda: session_nice(proc.pid) == 0, 10, "back to normal priority")


@pytest.mark.parametrize("nice", ["-1", "20"])
def test_a_nice_out_of_range_is_refused_before_anything_starts(nice: str) -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="--nice must be 0 to 19"):
        call_command("serve", "-p", str(free_port()), "--nice", nice)


def test_sigterm_stops_every_process(serve):
    proc, _ = serve
    started = children(proc.pid)
    assert len(started) == 3
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    for pid in started:
        assert not Path(f"/proc/{pid}").exists()


def test_a_process_that_dies_stops_the_web(serve):
    proc, _ = serve
    first, second = daphnes(proc.pid)
    os.kill(first, signal.SIGKILL)
    assert proc.wait(timeout=20) != 0
    wait_until(lambda: not Path(f"/proc/{second}").exists(), 5, "the other Daphne to stop")


def test_a_killed_serve_leaves_no_daphne_serving_the_port(serve):
    proc, url = serve
    started = children(proc.pid)  # the Daphne processes and the answer builder
    proc.kill()  # SIGKILL: nothing of serve's own runs
    proc.wait(timeout=5)
    for pid in started:
        wait_until(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 20, f"Daphne {pid} to stop")
    assert not answers(url)
