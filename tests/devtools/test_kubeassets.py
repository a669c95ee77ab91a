"""Finding the control-plane binaries: HANDOFF_K8S_ASSETS (binaries or the tarball, unpacked
once and checked against SHA256SUMS), KUBEBUILDER_ASSETS, etcd from PATH; and what the k8s
tests do without them (skip with one line, fail under CI=true)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from devtools import kubeassets
from tests.conftest import BASE_DIR

COMPONENTS = kubeassets.COMPONENTS


def executable(folder: Path, name: str, body: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho {name} {body}\n")
    path.chmod(0o755)
    return path


def tarball(folder: Path, tmp: Path, sums: bool = True, corrupt: str = "") -> Path:
    """k8s-bin.tar.xz of three scripts in ``folder``, with SHA256SUMS beside it."""
    staging = tmp / "staging"
    for name in COMPONENTS:
        executable(staging, name)
    folder.mkdir(parents=True, exist_ok=True)
    with tarfile.open(folder / kubeassets.TARBALL, "w:xz") as archive:
        for name in COMPONENTS:
            archive.add(staging / name, arcname=name)
    if sums:
        lines = []
        for name in COMPONENTS:
            digest = hashlib.sha256((staging / name).read_bytes()).hexdigest()
            lines.append(f"{'0' * 64 if name == corrupt else digest}  {name}")
        (folder / kubeassets.SUMS).write_text("\n".join(lines) + "\n")
    return folder / kubeassets.TARBALL


def env_with(tmp: Path, **variables: str) -> dict[str, str]:
    path = tmp / "path"
    executable(path, "etcd")
    return {"PATH": str(path), **variables}


def test_without_a_variable_the_message_names_it(tmp_path: Path) -> None:
    with pytest.raises(kubeassets.AssetsMissing) as missing:
        kubeassets.find_binaries(env_with(tmp_path), cache=tmp_path / "cache")
    message = str(missing.value)
    assert "\n" not in message
    assert message.startswith("HANDOFF_K8S_ASSETS is not set")
    assert "make kube-assets" in message


def test_a_folder_of_binaries_and_etcd_from_path(tmp_path: Path) -> None:
    for name in COMPONENTS:
        executable(tmp_path / "assets", name)
    found = kubeassets.find_binaries(
        env_with(tmp_path, HANDOFF_K8S_ASSETS=str(tmp_path / "assets")), cache=tmp_path / "c"
    )
    assert found == {
        **{name: tmp_path / "assets" / name for name in COMPONENTS},
        "etcd": tmp_path / "path" / "etcd",
    }


def test_the_tarball_is_unpacked_once_and_checked(tmp_path: Path) -> None:
    tarball(tmp_path / "assets", tmp_path)
    env = env_with(tmp_path, HANDOFF_K8S_ASSETS=str(tmp_path / "assets"))
    found = kubeassets.find_binaries(env, cache=tmp_path / "cache")
    unpacked = found["kube-apiserver"].parent
    assert unpacked.parent == tmp_path / "cache"
    assert subprocess.run([found["kube-scheduler"]], capture_output=True).stdout.strip() == (
        b"kube-scheduler"
    )
    (unpacked / "marker").write_text("still the same copy")
    assert kubeassets.find_binaries(env, cache=tmp_path / "cache") == found
    assert (unpacked / "marker").exists()
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [unpacked.name]


def test_a_tarball_that_does_not_match_its_sums_is_refused(tmp_path: Path) -> None:
    tarball(tmp_path / "assets", tmp_path, corrupt="kube-apiserver")
    env = env_with(tmp_path, HANDOFF_K8S_ASSETS=str(tmp_path / "assets"))
    with pytest.raises(kubeassets.AssetsMissing, match="kube-apiserver does not match"):
        kubeassets.find_binaries(env, cache=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-checked is kept


def test_kubebuilder_assets_lack_the_scheduler_and_controller_manager(tmp_path: Path) -> None:
    """setup-envtest's folders hold etcd, kube-apiserver and kubectl only."""
    for name in ("etcd", "kube-apiserver", "kubectl"):
        executable(tmp_path / "envtest", name)
    with pytest.raises(kubeassets.AssetsMissing) as missing:
        kubeassets.find_binaries(
            {"PATH": "", "KUBEBUILDER_ASSETS": str(tmp_path / "envtest")}, cache=tmp_path / "c"
        )
    assert str(missing.value) == (
        f"KUBEBUILDER_ASSETS={tmp_path / 'envtest'} holds no kube-scheduler,"
        " kube-controller-manager (nor k8s-bin.tar.xz)"
    )
    for name in ("kube-scheduler", "kube-controller-manager"):
        executable(tmp_path / "more", name)
    found = kubeassets.find_binaries(
        {
            "PATH": "",
            "HANDOFF_K8S_ASSETS": str(tmp_path / "more"),
            "KUBEBUILDER_ASSETS": str(tmp_path / "envtest"),
        },
        cache=tmp_path / "c",
    )
    assert found["etcd"] == tmp_path / "envtest" / "etcd"
    assert found["kube-scheduler"] == tmp_path / "more" / "kube-scheduler"


def test_no_etcd_anywhere_says_which_package(tmp_path: Path) -> None:
    for name in COMPONENTS:
        executable(tmp_path / "assets", name)
    with pytest.raises(kubeassets.AssetsMissing, match="apt-get install etcd-server"):
        kubeassets.find_binaries(
            {"PATH": "", "HANDOFF_K8S_ASSETS": str(tmp_path / "assets")}, cache=tmp_path / "c"
        )


def run_k8s_test(tmp_path: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (*kubeassets.VARIABLES, "CI")}
    env.update(extra)
    test = "tests/k8s/test_control_plane.py::test_it_is_the_version_the_docs_describe"
    return subprocess.run(
        [sys.executable, "-m", "pytest", test, "-q", "-rs", "-p", "no:cacheprovider"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_outside_ci_the_k8s_tests_skip_with_one_line(tmp_path: Path) -> None:
    done = run_k8s_test(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skipped) == 1
    assert "HANDOFF_K8S_ASSETS is not set" in skipped[0]


@pytest.mark.slow
def test_in_ci_missing_assets_fail_the_k8s_tests(tmp_path: Path) -> None:
    done = run_k8s_test(tmp_path, CI="true")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "k8s tests need the control plane in CI: HANDOFF_K8S_ASSETS is not set" in done.stdout
