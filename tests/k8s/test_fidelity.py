"""``manage.py fidelity``: the ``fidelity`` scenario on the simulator (as Kubernetes 1.20) and
attached to a real v1.20.2 control plane the command starts itself from
HANDOFF_K8S_ASSETS, compared situation by situation. The figure documented in
docs/simulator.md ("N situations, M identical") is the floor: M must not fall below it.
"""

from __future__ import annotations

import re
import subprocess

import orjson
import pytest

from devtools import kubeassets
from tests.conftest import BASE_DIR, python_env
from tests.k8s.conftest import fidelity_command, fidelity_run, in_ci

FIGURE = re.compile(r"`(\d+) situations, (\d+) identical`")


def documented() -> tuple[int, int]:
    """The figure docs/simulator.md gives for ``manage.py fidelity`` (its first one)."""
    found = FIGURE.search((BASE_DIR / "docs" / "simulator.md").read_text())
    assert found, "docs/simulator.md gives no `N situations, M identical` figure"
    return int(found[1]), int(found[2])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    try:
        kubeassets.find_binaries()
    except kubeassets.AssetsMissing as exc:
        if in_ci():
            pytest.fail(f"k8s tests need the control plane in CI: {exc}", pytrace=False)
        pytest.skip(str(exc))
    early = fidelity_run()
    if early is not None:  # started with the first k8s test (tests/k8s/conftest.py)
        proc, out, log = early
        proc.wait(timeout=300)
        assert proc.returncode == 0, log.read_text()
        return orjson.loads(out.read_bytes())
    keep = tmp_path_factory.mktemp("fidelity")
    done = subprocess.run(
        fidelity_command(keep),
        cwd=BASE_DIR,
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


def test_the_simulator_matches_the_real_control_plane_as_documented(report: dict) -> None:
    total, identical = documented()
    assert report["server_version"] == "1.20"
    assert report["simulator_version"] == "1.20"
    assert report["total"] == total, [s["key"] for s in report["situations"]]
    different = {s["key"]: s["differences"] for s in report["situations"] if not s["identical"]}
    assert report["identical"] >= identical, different


def test_every_situation_of_the_scenario_was_seen_on_both_sides(report: dict) -> None:
    keys = {s["key"] for s in report["situations"]}
    assert {"default/fid-typo", "default/fid-fragile", "default/fid-doomed"} <= keys
    assert {"default/fid-web#1", "default/fid-web#2", "node/fid-lost"} <= keys
    missing = [
        s["key"]
        for s in report["situations"]
        if any(d["fact"] == "present" for d in s["differences"])
    ]
    assert missing == []
