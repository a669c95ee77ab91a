"""`manage.py serve`: several real Daphne processes on one listening socket, stopped together."""

import os
import signal
import sys
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
        wait_until(lambda: answers(url) and len(children(proc.pid)) == 2, 30, "serve")
        yield proc, url
    finally:
        if proc.poll() is None:
            stop(proc)


def test_two_daphne_processes_share_one_listening_socket(serve):
    proc, url = serve
    first, second = children(proc.pid)
    assert sockets(first) & sockets(second)  # the one socket the parent opened
    os.kill(first, signal.SIGSTOP)  # one process cannot accept: the other answers
    try:
        for _ in range(5):
            assert answers(url)
    finally:
        os.kill(first, signal.SIGCONT)


def test_sigterm_stops_every_process(serve):
    proc, _ = serve
    daphnes = children(proc.pid)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    for pid in daphnes:
        assert not Path(f"/proc/{pid}").exists()


def test_a_process_that_dies_stops_the_web(serve):
    proc, _ = serve
    first, second = children(proc.pid)
    os.kill(first, signal.SIGKILL)
    assert proc.wait(timeout=20) != 0
    wait_until(lambda: not Path(f"/proc/{second}").exists(), 5, "the other Daphne to stop")


def test_a_killed_serve_leaves_no_daphne_serving_the_port(serve):
    proc, url = serve
    daphnes = children(proc.pid)
    proc.kill()  # SIGKILL: nothing of serve's own runs
    proc.wait(timeout=5)
    for pid in daphnes:
        wait_until(lambda pid=pid: not Path(f"/proc/{pid}").exists(), 20, f"Daphne {pid} to stop")
    assert not answers(url)
