"""``manual-scheduling`` attached to a real v1.20.2 control plane: every situation of seed 003
is a pod spec or a node action, so the real scheduler, controllers and our kubelets
reproduce it (docs/simulator.md, "Attached to a real control plane"). The run has a control
plane of its own (tests/k8s/manual_scheduling.py says why)."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s

from devtools.controlplane import ControlPlane
from tests.k8s.conftest import attach_scenarios_run

pytestmark = [pytest.mark.k8s, pytest.mark.slow]


@pytest.fixture(scope="module")
def pods(control_plane: ControlPlane) -> dict[str, k8s.V1Pod]:
    """Every pod the run left, by name: it ran in the background on a control plane of
    its own (not ``control_plane``: that one only skips or fails the test when there are
    no binaries) from the start of the k8s tests (tests/k8s/manual_scheduling.py)."""
    run = attach_scenarios_run()
    assert run is not None, "the background run of manual-scheduling was not started"
    return run.result(timeout=300)


def test_pinned_and_scheduled_pods_run(pods: dict[str, k8s.V1Pod]) -> None:
    assert pods["pinned"].status.phase == "Running"
    assert pods["pinned"].spec.node_name == "worker-2"
    assert pods["plain"].status.phase == "Running"
    # nodeName bypasses the NoSchedule taint the real scheduler respects.
    assert pods["pinned-tainted"].status.phase == "Running"
    assert pods["pinned-tainted"].spec.node_name == "worker-1"
    tainted = pods["tainted"]
    assert tainted.spec.node_name is None
    scheduled = {c.type: c for c in tainted.status.conditions}["PodScheduled"]
    assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
    web = [p for name, p in pods.items() if name.startswith("web-")]
    assert len(web) == 3
    assert {p.spec.node_name for p in web} == {"worker-2"}
    assert {p.status.phase for p in web} == {"Running"}


@pytest.mark.parametrize(
    ("name", "reason", "message"),
    [
        ("bigcpu", "OutOfcpu", "Pod Node didn't have enough resource: cpu, requested: 100000"),
        ("bigmem", "OutOfmemory", "Pod Node didn't have enough resource: memory"),
        ("badsel", "NodeAffinity", "Pod Predicate NodeAffinity failed"),
    ],
)
def test_kubelet_admission_rejects_as_a_v1_20_kubelet(
    pods: dict[str, k8s.V1Pod], name: str, reason: str, message: str
) -> None:
    status = pods[name].status
    assert status.phase == "Failed"
    assert status.reason == reason
    assert status.message.startswith(message)
    assert not status.conditions


def test_static_pods_are_mirrored_and_the_typo_waits_for_podgc(
    pods: dict[str, k8s.V1Pod],
) -> None:
    mirror = pods["kube-scheduler-control-plane"]
    assert "kubernetes.io/config.mirror" in mirror.metadata.annotations
    assert mirror.metadata.owner_references[0].kind == "Node"
    assert pods["ghost3"].spec.node_name == "worker-3"
    assert pods["ghost3"].status.phase == "Pending"
