"""``kubectl handoff --local``: no Handoff server, the plugin watches the kubeconfig's
cluster itself for a few seconds and folds what it saw. Through kubectl, against the
simulator served over HTTP (``simulate --serve``), and against a real v1.20.2 control plane
of its own (started by the project's own code from HANDOFF_K8S_ASSETS, as tests/k8s is:
missing binaries skip with one line, and fail under CI)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devtools import controlplane, kubeassets
from devtools.devstack import free_port
from tests.conftest import wait_until
from tests.sim.helpers import control, served_from_the_command_line

from .kubectl import kubectl, one_line_error

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def hung_kubelet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """handoff-failures at wall-clock speed, 22 s in: worker-4's kubelet hung at 5 s, and
    ``stale``, bound there at about 15 s, has heard nothing since. KUBECONFIG for it."""
    tmp = tmp_path_factory.mktemp("local")
    with served_from_the_command_line(tmp, "--speed", "1", scenario="handoff-failures") as (
        _,
        address,
    ):
        wait_until(lambda: control(address, "/_sim/clock")[1]["elapsed"] >= 22, 60, "22 s in")
        yield {"KUBECONFIG": str(tmp / "kubeconfig")}


def test_local_triage_sees_the_pod_a_hung_kubelet_holds(hung_kubelet) -> None:
    result = kubectl(
        "handoff", "triage", "--local", "--stuck-after", "5", "-o", "json", **hung_kubelet
    )

    assert result.returncode == 0, result.stderr
    pods = {p["name"]: p for p in json.loads(result.stdout)["pods"]}
    assert {p["namespace"] for p in pods.values()} == {"default"}  # the context's namespace
    stale = pods["stale"]
    assert (stale["verdict"], stale["reason"], stale["node"]) == (
        "stuck",
        "kubelet-silent",
        "worker-4",
    )
    # Running on worker-3, which died at 15 s: node-lost once its grace (40 s) is over.
    assert (pods["victim"]["node"], pods["victim"]["verdict"]) in (
        ("worker-3", "running"),
        ("worker-3", "node-lost"),
    )


def test_local_pod_and_all_namespaces_read_as_with_a_server(hung_kubelet) -> None:
    pod = kubectl("handoff", "pod", "stale", "--local", "--stuck-after", "5", **hung_kubelet)
    table = kubectl("handoff", "triage", "-A", "--local", "--watch-seconds", "2", **hung_kubelet)

    assert pod.returncode == 0, pod.stderr
    assert "Verdict:      stuck (bound but not running for too long)" in pod.stdout
    assert "Reason:       kubelet-silent" in pod.stdout
    assert "journalctl -u kubelet" in " ".join(pod.stdout.split())  # the remedy
    assert "awaiting-kubelet" in pod.stdout.split("Timeline:")[1]
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()]
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert {"default", "kube-system"} <= {row[0] for row in rows[1:]}


def test_local_errors_are_one_line(hung_kubelet, tmp_path: Path) -> None:
    config = yaml.safe_load(Path(hung_kubelet["KUBECONFIG"]).read_text())
    config["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{free_port()}"
    unreachable = tmp_path / "unreachable"
    unreachable.write_text(yaml.safe_dump(config))

    cases = {
        "unknown context": (["--context", "nope"], hung_kubelet, 'context "nope" does not exist'),
        "API server down": ([], {"KUBECONFIG": str(unreachable)}, "cannot watch pods in context"),
        "no such pod": (["pod", "nosuchpod"], hung_kubelet, 'pod "nosuchpod" not seen'),
    }
    for case, (args, env, said) in cases.items():
        command = args if args[:1] == ["pod"] else ["triage", *args]
        result = kubectl("handoff", *command, "--local", "--watch-seconds", "1", **env)
        assert said in one_line_error(result), case


# ------------------------------------------------------------ a real control plane


@pytest.fixture(scope="module")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """etcd, kube-apiserver, kube-scheduler, kube-controller-manager v1.20.2 on loopback (no
    kubelets, and no node: a module's own, apart from tests/k8s's): the admin kubeconfig."""
    try:
        binaries = kubeassets.find_binaries()
    except kubeassets.AssetsMissing as exc:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"the kubectl plugin's control-plane test needs it in CI: {exc}")
        pytest.skip(str(exc))
    plane = controlplane.start(tmp_path_factory.mktemp("control-plane"), binaries)
    try:
        yield str(plane.admin_kubeconfig)
    finally:
        plane.stop()


PODS = """
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: lonely}
    spec: {containers: [{name: c, image: "nginx:1.27"}]}
  - apiVersion: v1
    kind: Pod
    metadata: {name: pinned}
    spec: {nodeName: ghost-node, containers: [{name: c, image: "nginx:1.27"}]}
"""


def test_local_against_a_real_control_plane(control_plane: str, tmp_path: Path) -> None:
    env = {"KUBECONFIG": control_plane}
    (tmp_path / "pods.yaml").write_text(PODS)
    applied = kubectl("apply", "-f", str(tmp_path / "pods.yaml"), **env)
    assert applied.returncode == 0, applied.stderr

    def scheduler_gave_up() -> bool:
        events = kubectl(
            "get", "events", "--field-selector", "involvedObject.name=lonely", "-o", "name", **env
        )
        return bool(events.stdout.strip())

    wait_until(scheduler_gave_up, 60, "the scheduler's FailedScheduling for lonely")
    result = kubectl("handoff", "triage", "--local", "--stuck-after", "1", "-o", "json", **env)
    pod = kubectl("handoff", "pod", "lonely", "--local", "--watch-seconds", "2", **env)

    assert result.returncode == 0, result.stderr
    pods = {p["name"]: p for p in json.loads(result.stdout)["pods"]}
    assert (pods["lonely"]["verdict"], pods["lonely"]["reason"]) == ("unscheduled", "Unschedulable")
    assert (pods["pinned"]["verdict"], pods["pinned"]["node"]) == ("stuck", "ghost-node")
    assert pod.returncode == 0, pod.stderr
    assert "FailedScheduling" in pod.stdout
    assert "no nodes available to schedule pods" in pod.stdout
