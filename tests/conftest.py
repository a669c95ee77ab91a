"""Shared fixtures: a real redis-server for the whole run, and real Celery workers.

Every test session starts its own redis-server on a free port in a temporary directory and
points Django (REDIS_URL, the channel layer, Celery) and every subprocess at it, so no test
ever touches a developer's Redis on 6379.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.test import override_settings

from devtools.devstack import free_port, start_time, stop_groups
from handoff.live import health
from handoff.settings import channel_layers

BASE_DIR = Path(__file__).resolve().parent.parent

# A suite launched from a script's background job starts with SIGINT ignored, and every
# process it starts would inherit that (an ignored signal survives exec, a handled one
# does not): the tests that stop a process with SIGINT must not depend on how the suite
# was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def spawn(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start a process in its own process group (so `stop` reaches its children too)."""
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv,
            cwd=BASE_DIR,
            env=env if env is not None else os.environ.copy(),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM the process and its group, SIGKILL whatever outlives `timeout`."""
    stop_groups([(proc.pid, start_time(proc.pid) or 0)], timeout)
    proc.wait(timeout=5)


def answers(url: str) -> bool:
    """Something answers at ``url`` (an HTTP error is an answer too)."""
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def start_daphne(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    """Daphne serving the site on a free port with ``env``; returns once it answers."""
    port = free_port()
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    proc = spawn([*argv, "handoff.asgi:application"], log, {**os.environ, **env})
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: answers(url + "/healthz"), 30, f"Daphne on {url}")
    return proc, url


def start_redis(directory: Path) -> tuple[subprocess.Popen, str]:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.exit("redis-server not found: install it (Debian: apt-get install redis-server)")
    port = free_port()
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory)]
    argv += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
    proc = spawn(argv, directory / "redis.log")
    client = redis.Redis(port=port)

    def answers() -> bool:
        try:
            return client.ping()
        except redis.ConnectionError:
            return False

    wait_until(answers, 10, f"redis-server on port {port}")
    client.close()
    return proc, f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="session", autouse=True)
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of this run's private redis-server; Django and subprocesses already use it."""
    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    previous = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = url  # For subprocesses: workers, Daphne, the demo.
    overrides = override_settings(
        REDIS_URL=url,
        CELERY_BROKER_URL=url,
        CELERY_RESULT_BACKEND=url,
        CHANNEL_LAYERS=channel_layers(url),
    )
    overrides.enable()
    from handoff.celery import app

    app.conf.update(broker_url=url, result_backend=url)
    yield url
    overrides.disable()
    if previous is None:
        os.environ.pop("REDIS_URL", None)
    else:
        os.environ["REDIS_URL"] = previous
    stop(proc)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client on the test redis-server, emptied before the test."""
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    yield client
    client.close()


def python_env(**extra: str) -> dict[str, str]:
    env = os.environ.copy()
    env.update(DJANGO_SETTINGS_MODULE="handoff.settings", PYTHONUNBUFFERED="1", **extra)
    return env


@pytest.fixture
def celery_worker(
    redis_client: redis.Redis, tmp_path: Path
) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start real `celery -A handoff worker` processes: `celery_worker(queues="default")`.

    Returns once the worker has run its first heartbeat task (so it consumes tasks).
    Every worker started is stopped after the test; its log is tmp_path/worker-N.log.
    """
    started: list[subprocess.Popen] = []

    def start(queues: str = "default,watch", concurrency: int = 1) -> subprocess.Popen:
        redis_client.delete(health.HEARTBEAT_KEY)
        name = f"worker-{len(started)}"
        argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", queues]
        argv += ["-c", str(concurrency), "-n", f"{name}@%h", "-l", "info"]
        argv += ["--without-gossip", "--without-mingle"]
        proc = spawn(argv, tmp_path / f"{name}.log", python_env(HANDOFF_RUN_DIR=str(tmp_path)))
        started.append(proc)
        wait_until(lambda: redis_client.get(health.HEARTBEAT_KEY), 30, f"{name}'s heartbeat")
        return proc

    yield start
    for proc in started:
        stop(proc)
