"""The ``k8s`` tests: a real control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager v1.20.2) started once per session, and Handoff's live path
watching it as deploy/rbac.yaml's service account.

The binaries come from HANDOFF_K8S_ASSETS or KUBEBUILDER_ASSETS (devtools/kubeassets.py).
Without them the tests skip with one line naming the variable; with CI=true they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from devtools import controlplane, kubeassets
from tests.browser.conftest import site_database  # noqa: F401 (a fixture the stack uses)
from tests.conftest import BASE_DIR, python_env, start_redis, stop
from tests.k8s.nodes import NodeAgent
from tests.k8s.stack import Stack, start_stack

READER = "system:serviceaccount:handoff:handoff"  # deploy/rbac.yaml's service account
_timings: dict[str, float] = {}
FIDELITY_TESTS = Path(__file__).parent / "test_fidelity.py"
_fidelity: dict[str, Any] = {"wanted": False}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(item.fspath).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.k8s)
            item.add_marker(pytest.mark.slow)
        if Path(item.fspath) == FIDELITY_TESTS:
            _fidelity["wanted"] = True


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if "start" in _timings:
        terminalreporter.write_line(
            f"k8s: control plane {_timings.get('version', '')} ready in {_timings['start']:.1f}s"
        )


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def fidelity_command(keep: Path) -> list[str]:
    return [sys.executable, "manage.py", "fidelity", "--json", "--keep", str(keep)]


@pytest.fixture(scope="session", autouse=True)
def _fidelity_early(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``manage.py fidelity`` on a control plane of its own, started with the first k8s
    test when test_fidelity.py is in the run: its two minutes are mostly waiting for the
    real PodGC and taint manager (little CPU), so they pass while the other k8s tests
    run; test_fidelity.py then reads the result (``fidelity_run``)."""
    if not _fidelity["wanted"]:
        yield
        return
    try:
        kubeassets.find_binaries()
    except kubeassets.AssetsMissing:
        yield  # test_fidelity.py fails or skips with the reason
        return
    work = tmp_path_factory.mktemp("fidelity")
    out, log = work / "report.json", work / "fidelity.log"
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen(
            fidelity_command(work / "traces"),
            cwd=BASE_DIR,
            env=python_env(),
            stdout=stdout,
            stderr=stderr,
        )
    _fidelity.update(proc=proc, out=out, log=log)
    yield
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=60)


def fidelity_run() -> tuple[subprocess.Popen, Path, Path] | None:
    """The early run of ``manage.py fidelity`` (process, its JSON file, its log), if any."""
    if "proc" not in _fidelity:
        return None
    return _fidelity["proc"], _fidelity["out"], _fidelity["log"]


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """The session's control plane. The API server audits the reader's requests (its
    ``audit.log``), so a test can check that Handoff asked for nothing outside its role."""
    try:
        binaries = kubeassets.find_binaries()
    except kubeassets.AssetsMissing as exc:
        if in_ci():
            pytest.fail(f"k8s tests need the control plane in CI: {exc}", pytrace=False)
        pytest.skip(str(exc))
    started = time.monotonic()
    plane = controlplane.start(tmp_path_factory.mktemp("k8s"), binaries, audited_users=(READER,))
    _timings.update(start=time.monotonic() - started)
    _timings["version"] = plane.version  # type: ignore[assignment]
    yield plane
    plane.stop()


@pytest.fixture(scope="session")
def reader_kubeconfig(control_plane: controlplane.ControlPlane) -> Path:
    """A kubeconfig for deploy/rbac.yaml's service account: Handoff's only identity."""
    return controlplane.grant_reader(
        control_plane,
        BASE_DIR / "deploy" / "rbac.yaml",
        control_plane.directory / "reader.kubeconfig",
    )


@pytest.fixture(scope="session")
def admin(control_plane: controlplane.ControlPlane) -> Iterator[k8s.ApiClient]:
    """An admin client: the tests act on the cluster with it, as its users would."""
    with controlplane.admin_client(control_plane) as api:
        yield api


@pytest.fixture(scope="session")
def node_agent(admin: k8s.ApiClient) -> Iterator[NodeAgent]:
    agent = NodeAgent(admin)
    yield agent
    agent.stop()


@pytest.fixture(scope="session")
def stack(
    site_database: str,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
    reader_kubeconfig: Path,
) -> Iterator[Stack]:
    """Handoff's processes on a redis-server of their own (tests that empty the session's
    redis cannot disturb them)."""
    base = tmp_path_factory.mktemp("stack")
    redis_proc, url = start_redis(base)
    try:
        running = start_stack(base, site_database, url)
        yield running
        running.stop()
    finally:
        stop(redis_proc)
