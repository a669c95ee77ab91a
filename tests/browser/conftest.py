"""Browser fixtures: Debian's Chromium driven by Playwright, and Daphne serving the site.

Never downloads a browser: Playwright launches /usr/bin/chromium (`make test` installs it).
Screenshots go to tests/artifacts/ (ignored by git).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from devtools.devstack import free_port
from handoff.live import clusters, store
from tests.conftest import (
    BASE_DIR,
    python_env,
    spawn,
    start_daphne,
    start_redis,
    stop,
    wait_until,
)

CHROMIUM = "/usr/bin/chromium"
# Headless in a sandbox without a network: no GPU, no background calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = BASE_DIR / "tests" / "artifacts"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.fspath).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium shared by the session (a playwright.sync_api.Browser)."""
    from playwright.sync_api import sync_playwright

    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (make test does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    """A fresh page in its own context (no cookies shared between tests)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot(page, request) -> Callable[[str], Path]:
    """screenshot("label") saves the page as tests/artifacts/<test>-<label>.png."""

    def take(label: str = "") -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = request.node.name + (f"-{label}" if label else "")
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture(scope="session")
def site_database(tmp_path_factory: pytest.TempPathFactory) -> str:
    """DATABASE_URL of a migrated SQLite file the served sites share."""
    path = tmp_path_factory.mktemp("site") / "db.sqlite3"
    url = f"sqlite:///{path}"
    env = {**os.environ, "DATABASE_URL": url}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
        cwd=BASE_DIR,
        env=env,
        check=True,
        timeout=120,
    )
    return url


@pytest.fixture(scope="session")
def serve(
    site_database: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[..., str]]:
    """serve(**env) starts Daphne with extra environment (once per distinct env), returns
    its base URL such as http://127.0.0.1:41234. Stopped at the end of the session."""
    logs = tmp_path_factory.mktemp("daphne")
    servers: dict[frozenset, tuple[subprocess.Popen, str]] = {}

    def start(**env: str) -> str:
        key = frozenset(env.items())
        if key not in servers:
            full_env = {
                "DATABASE_URL": site_database,
                "REDIS_URL": redis_url,
                "PYTHONUNBUFFERED": "1",
                **env,
            }
            servers[key] = start_daphne(full_env, logs / f"{len(servers)}.log")
        return servers[key][1]

    yield start
    for proc, _ in servers.values():
        stop(proc)


@pytest.fixture(scope="session")
def demo_site(serve: Callable[..., str]) -> str:
    """Base URL of the site in demo mode (HANDOFF_DEMO=1)."""
    return serve(HANDOFF_DEMO="1")


@pytest.fixture(scope="session")
def private_site(serve: Callable[..., str]) -> str:
    """Base URL of the site outside demo mode: sign-in required."""
    return serve(HANDOFF_DEMO="0")


# ------------------------------------------------------------- a live cluster

LIVE_CLUSTER = "manual"
LIVE_STUCK_AFTER = "10"  # seconds: the typo'd pod turns stuck well before PodGC takes it


@dataclass(frozen=True)
class LiveCluster:
    """The simulator serving ``manual-scheduling`` at wall-clock speed, watched through the
    kubernetes client by a real Celery worker (watches, fold, push) under beat, with a
    demo-mode Daphne — all on a redis-server of their own, so tests that empty the
    session's redis (the ``redis_client`` fixture) cannot disturb it."""

    name: str
    site: str  # base URL of the Daphne reading this cluster's redis
    redis_url: str
    started: float  # time.monotonic() when the simulator started: virtual t=0

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def board(self, query: str = "") -> str:
        return f"{self.site}/clusters/{self.name}/{query}"

    def elapsed(self) -> float:
        return time.monotonic() - self.started


@pytest.fixture(scope="package")
def live_cluster(
    site_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveCluster]:
    """The whole live path for the browser tests of this package (started once, on first
    use; stopped after the package's last test). Reusable by any browser test."""
    base = tmp_path_factory.mktemp("live")
    redis_proc, url = start_redis(base)
    env = python_env(
        REDIS_URL=url,
        DATABASE_URL=site_database,
        HANDOFF_RUN_DIR=str(base),
        HANDOFF_STUCK_AFTER=LIVE_STUCK_AFTER,
    )
    procs: list[subprocess.Popen] = []
    try:
        kubeconfig = base / "kubeconfig"
        argv = [sys.executable, "manage.py", "simulate", "--scenario", "manual-scheduling"]
        argv += ["--seed", "3", "--speed", "1", "--duration", "900"]
        argv += ["--serve", f"127.0.0.1:{free_port()}", "--kubeconfig", str(kubeconfig)]
        procs.append(spawn(argv, base / "simulator.log", env))
        started = time.monotonic()
        wait_until(kubeconfig.exists, 30, "the simulator's kubeconfig")
        client = redis.Redis.from_url(url)
        config = clusters.ClusterConfig(
            name=LIVE_CLUSTER, kind="kubeconfig", kubeconfig=str(kubeconfig)
        )
        clusters.register_cluster(client, config)
        celery = [sys.executable, "-m", "celery", "-A", "handoff"]
        worker = [*celery, "worker", "-Q", "default,watch", "-c", "6", "-n", "live@%h"]
        worker += ["-l", "info", "--without-gossip", "--without-mingle"]
        procs.append(spawn(worker, base / "worker.log", env))
        beat = [*celery, "beat", "-l", "info", "-s", str(base / "beat-schedule")]
        procs.append(spawn(beat, base / "beat.log", env))
        proc, site = start_daphne({**env, "HANDOFF_DEMO": "1"}, base / "daphne.log")
        procs.append(proc)
        wait_until(lambda: client.hlen(store.pods_key(LIVE_CLUSTER)) > 0, 90, "the first pods")
        client.close()
        yield LiveCluster(LIVE_CLUSTER, site, url, started)
    finally:
        for proc in reversed(procs):
            stop(proc)
        stop(redis_proc)
