"""``simulate --attach`` without a control plane: bad input is one clear line, and the
attached kubelets' version shapes (pkg/kubelet/kubelet.go rejectPod before and after 1.26,
PodReadyToStartContainers from 1.29) hold on the simulator's own API server too."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from handoff.sim.attached import merge_diff
from handoff.sim.attached.driver import NodeFault
from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.objects import Obj
from handoff.sim.scenarios.manifests import simple_pod


def test_merge_diff_sends_changes_and_removals_only() -> None:
    old = {"phase": "Pending", "conditions": [{"type": "A"}], "hostIP": "1.2.3.4", "x": {"a": 1}}
    new = {"phase": "Failed", "conditions": [{"type": "A"}], "x": {"a": 1, "b": 2}, "y": 1}
    assert merge_diff(old, new) == {"phase": "Failed", "hostIP": None, "x": {"b": 2}, "y": 1}
    assert merge_diff(old, old) == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("worker-2:stop@30", NodeFault("worker-2", "stop", 30.0)),
        ("worker-1:delete", NodeFault("worker-1", "delete", 0.0)),
    ],
)
def test_node_faults_parse(text: str, expected: NodeFault) -> None:
    assert NodeFault.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("worker-2", "NODE:MODE"),
        ("worker-2:explode@3", "the mode must be one of"),
        ("worker-2:stop@soon", "is not a number"),
        ("worker-2:stop@-1", "cannot be negative"),
    ],
)
def test_bad_node_faults_say_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        NodeFault.parse(text)


def test_a_missing_kubeconfig_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not a usable kubeconfig") as caught:
        call_command("simulate", attach=str(tmp_path / "nope"), scenario="manual-scheduling")
    assert "\n" not in str(caught.value)


def test_an_unreachable_api_server_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n"
        "users:\n- name: u\n  user:\n    token: t\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        "current-context: c\n"
    )
    with pytest.raises(CommandError, match=f"127.0.0.1:{port}") as caught:
        call_command("simulate", attach=str(kubeconfig), scenario="manual-scheduling")
    assert "\n" not in str(caught.value)


def test_scenarios_that_need_our_control_plane_refuse_to_attach(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="cannot run attached"):
        call_command("simulate", attach=str(tmp_path / "k"), scenario="handoff-failures")


def test_attach_options_need_attach() -> None:
    with pytest.raises(CommandError, match="need --attach"):
        call_command("simulate", scenario="manual-scheduling", node_fault=["worker-1:stop"])


def _rejected_and_running(version: str) -> tuple[Obj, Obj]:
    cluster = Cluster(ClusterConfig(kubelet_version=version))
    cluster.add_node("worker-1")
    cluster.create_pod(simple_pod("big", node_name="worker-1", cpu="100"))
    cluster.create_pod(simple_pod("fits", node_name="worker-1"))
    cluster.loop.run(until=30.0)
    return (
        cluster.api.get("pods", "default", "big")["status"],
        cluster.api.get("pods", "default", "fits")["status"],
    )


def test_a_v1_20_kubelet_rejects_with_the_old_prefix_and_writes_no_sandbox_condition() -> None:
    rejected, running = _rejected_and_running("v1.20.2")
    assert rejected["message"].startswith("Pod Node didn't have enough resource: cpu")
    assert "qosClass" not in rejected
    types = [c["type"] for c in running["conditions"]]
    assert types == ["Initialized", "Ready", "ContainersReady", "PodScheduled"]


def test_a_current_kubelet_rejects_with_the_new_prefix_and_writes_the_sandbox_condition() -> None:
    rejected, running = _rejected_and_running("v1.33.1")
    assert rejected["message"].startswith("Pod was rejected: Node didn't have enough resource")
    assert rejected["qosClass"] == "Burstable"  # a cpu request, no limit
    assert running["conditions"][0]["type"] == "PodReadyToStartContainers"
