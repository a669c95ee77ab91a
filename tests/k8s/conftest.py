"""The ``k8s`` tests: a real control plane (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager v1.20.2) started once for the k8s tests, and Handoff's live path
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
from tests.k8s import faults as faulty
from tests.k8s import manual_scheduling
from tests.k8s.background import InBackground
from tests.k8s.nodes import NodeAgent
from tests.k8s.stack import Stack, start_stack
from tests.k8s.staging import Staging, staged

READER = "system:serviceaccount:handoff:handoff"  # deploy/rbac.yaml's service account
_timings: dict[str, float] = {}
HERE = Path(__file__).parent
FIDELITY_TESTS = HERE / "test_fidelity.py"
_fidelity: dict[str, Any] = {"wanted": False}
# The k8s test files that use Handoff's stack (the ``stack`` fixture).
STACK_USERS = {
    "test_faults.py",
    "test_credential_faults.py",
    "test_kubelet_situations.py",
    "test_situations.py",
}
_early: dict[str, InBackground] = {}
# The order the k8s modules run in (any other after them, as collected). test_faults.py
# first: its API server restarts and worker stop would blind the staged situations'
# watchers. Then the situations are staged (tests/k8s/staging.py), and
# test_attach_kubelets.py and test_credential_faults.py run while the controllers' clocks
# run for them; then their tests read what they came to. test_fidelity.py and
# test_attach_scenarios.py read what ran in the background from the first k8s test on.
ORDER = (
    "test_control_plane.py",
    "test_faults.py",
    "test_attach_kubelets.py",
    "test_credential_faults.py",
    "test_kubelet_situations.py",
    "test_situations.py",
    "test_attach_scenarios.py",
    "test_fidelity.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mine = [i for i, item in enumerate(items) if Path(item.fspath).is_relative_to(HERE)]
    for index in mine:
        items[index].add_marker(pytest.mark.k8s)
        items[index].add_marker(pytest.mark.slow)
        if Path(items[index].fspath) == FIDELITY_TESTS:
            _fidelity["wanted"] = True
    ordered = sorted((items[i] for i in mine), key=_rank)  # stable: tests keep their order
    for index, item in zip(mine, ordered, strict=True):
        items[index] = item


def _rank(item: pytest.Item) -> int:
    name = Path(item.fspath).name
    return ORDER.index(name) if name in ORDER else len(ORDER)


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


@pytest.fixture(scope="package", autouse=True)
def _in_background(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Started with the first k8s test, in threads, what needs no test: Handoff's stack
    (redis-server, worker, beat, Daphne) boots while the session's control plane starts;
    once that is up, test_attach_scenarios.py's run (40 s of a scenario on a control plane
    of its own, tests/k8s/manual_scheduling.py) begins (three control planes starting at
    once, with fidelity's, would only slow each other)."""
    in_run = _in_run(request)
    try:
        binaries = kubeassets.find_binaries()
    except kubeassets.AssetsMissing:
        binaries = None  # the tests' control_plane fixture fails or skips with the reason
    if binaries is not None and in_run & STACK_USERS:
        database = request.getfixturevalue("site_database")
        base = tmp_path_factory.mktemp("stack")
        _early["stack"] = InBackground("stack", lambda: _boot_stack(base, database))
    if binaries is not None and "test_attach_scenarios.py" in in_run:
        request.getfixturevalue("control_plane")
        directory = tmp_path_factory.mktemp("manual-scheduling")
        _early["attach_scenarios"] = InBackground(
            "manual-scheduling", lambda: manual_scheduling.run(directory, binaries)
        )
    yield
    unused = _early.pop("stack", None)  # booted, but no test of the run asked for it
    if unused is not None:
        _stop_stack(*unused.result(timeout=300))


def _in_run(request: pytest.FixtureRequest) -> set[str]:
    """The k8s test files with tests in this run (after -k and -m deselection)."""
    return {
        Path(item.fspath).name
        for item in request.session.items
        if Path(item.fspath).is_relative_to(HERE)
    }


def _boot_stack(base: Path, database: str) -> tuple[Stack, subprocess.Popen]:
    """Handoff's processes on a redis-server of their own, ready; and that redis-server."""
    redis_proc, url = start_redis(base)
    try:
        return start_stack(base, database, url), redis_proc
    except BaseException:
        stop(redis_proc)
        raise


def _stop_stack(running: Stack, redis_proc: subprocess.Popen) -> None:
    try:
        running.stop()
    finally:
        stop(redis_proc)


def attach_scenarios_run() -> InBackground | None:
    """The background run of test_attach_scenarios.py, if it was started."""
    return _early.get("attach_scenarios")


def fidelity_run() -> tuple[subprocess.Popen, Path, Path] | None:
    """The early run of ``manage.py fidelity`` (process, its JSON file, its log), if any."""
    if "proc" not in _fidelity:
        return None
    return _fidelity["proc"], _fidelity["out"], _fidelity["log"]


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
def reader_kubeconfig(control_plane: controlplane.ControlPlane) -> Path:
    """A kubeconfig for deploy/rbac.yaml's service account: Handoff's only identity."""
    return controlplane.grant_reader(
        control_plane,
        BASE_DIR / "deploy" / "rbac.yaml",
        control_plane.directory / "reader.kubeconfig",
    )


@pytest.fixture(scope="package")
def admin(control_plane: controlplane.ControlPlane) -> Iterator[k8s.ApiClient]:
    """An admin client: the tests act on the cluster with it, as its users would."""
    with controlplane.admin_client(control_plane) as api:
        yield api


@pytest.fixture(scope="package")
def node_agent(admin: k8s.ApiClient) -> Iterator[NodeAgent]:
    agent = NodeAgent(admin)
    yield agent
    agent.stop()


@pytest.fixture(scope="package")
def stack(site_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:  # noqa: F811
    """Handoff's processes on a redis-server of their own (tests that empty the session's
    redis cannot disturb them), booted in the background from the first k8s test."""
    early = _early.pop("stack", None)
    if early is not None:
        running, redis_proc = early.result(timeout=300)
    else:
        running, redis_proc = _boot_stack(tmp_path_factory.mktemp("stack"), site_database)
    yield running
    _stop_stack(running, redis_proc)


@pytest.fixture(scope="package")
def staging(request: pytest.FixtureRequest) -> Iterator[Staging]:
    """The situations of test_situations.py and test_kubelet_situations.py (those in the
    run), staged together when the first test that needs them starts: their tests, and
    test_attach_kubelets.py, whose nodes must register after situation (c)'s."""
    in_run = _in_run(request)
    situations = "test_situations.py" in in_run
    kubelets = "test_kubelet_situations.py" in in_run
    if not situations and not kubelets:
        yield Staging()
        return
    with staged(
        request.getfixturevalue("stack"),
        request.getfixturevalue("control_plane"),
        request.getfixturevalue("admin"),
        request.getfixturevalue("node_agent"),
        request.getfixturevalue("reader_kubeconfig"),
        situations=situations,
        kubelets=kubelets,
    ) as done:
        yield done


@pytest.fixture(scope="package")
def faults(
    stack: Stack,
    control_plane: controlplane.ControlPlane,
    admin: k8s.ApiClient,
    reader_kubeconfig: Path,  # deploy/rbac.yaml applied: its ClusterRole exists
    tmp_path_factory: pytest.TempPathFactory,
) -> faulty.Faults:
    """The faults' cluster (tests/k8s/faults.py), for test_faults.py before the staging
    and test_credential_faults.py after it."""
    return faulty.register(stack, control_plane, admin, tmp_path_factory.mktemp("faults"))
