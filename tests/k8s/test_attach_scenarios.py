"""``manual-scheduling`` attached to a real v1.20.2 control plane: every situation of seed 003
is a pod spec or a node action, so the real scheduler, controllers and our kubelets
reproduce it (docs/simulator.md, "Attached to a real control plane")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devtools.controlplane import ControlPlane
from handoff.attach.run import attach
from handoff.sim import Options, find_scenario

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
NODES = ("control-plane", "worker-1", "worker-2")
RUN_S = 40.0  # past the rejections at 30-32 s and the typo'd node at 40 s


@pytest.fixture(scope="module")
def pods(control_plane: ControlPlane) -> Iterator[dict[str, k8s.V1Pod]]:
    api = k8s_config.new_client_from_config(config_file=str(control_plane.admin_kubeconfig))
    core, apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
    run = attach(
        find_scenario("manual-scheduling", None),
        Options(duration=RUN_S),
        str(control_plane.admin_kubeconfig),
    )
    run.start()
    assert run.wait(RUN_S + 60), "the attached run did not end"
    run.stop()
    assert run.error is None
    found = {p.metadata.name: p for p in core.list_pod_for_all_namespaces().items}
    yield found
    for namespace, name in (("default", "web"), ("kube-system", "coredns")):
        with contextlib.suppress(k8s.ApiException):
            apps.delete_namespaced_deployment(name, namespace)
    for pod in found.values():
        if pod.metadata.namespace in ("default", "kube-system"):
            with contextlib.suppress(k8s.ApiException):
                core.delete_namespaced_pod(
                    pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
                )
    for name in NODES:
        with contextlib.suppress(k8s.ApiException):
            core.delete_node(name)
    api.close()


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
