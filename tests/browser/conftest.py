"""Browser fixtures: Debian's Chromium driven by Playwright, and Daphne serving the site.

Never downloads a browser: Playwright launches /usr/bin/chromium (`make test` installs it).
Screenshots go to tests/artifacts/ (ignored by git).
"""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from handoff.devstack import free_port
from tests.conftest import BASE_DIR, spawn, stop, wait_until

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


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


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
            port = free_port()
            argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
            full_env = {
                **os.environ,
                "DATABASE_URL": site_database,
                "REDIS_URL": redis_url,
                "PYTHONUNBUFFERED": "1",
                **env,
            }
            proc = spawn([*argv, "handoff.asgi:application"], logs / f"{port}.log", full_env)
            url = f"http://127.0.0.1:{port}"
            servers[key] = (proc, url)
            wait_until(lambda: _answers(url + "/healthz"), 30, f"Daphne on {url}")
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
