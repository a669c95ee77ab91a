"""The simulator's kubelets attached to a real v1.20.2 control plane (``simulate --attach``):
the real scheduler binds, our kubelets register, heartbeat, admit, run and finish pods, and
the shapes they write are the ones a v1.20 kubelet writes (pkg/kubelet/kubelet.go rejectPod,
pkg/kubelet/kubelet_pods.go generateAPIPodStatus, pkg/kubelet/nodelease)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devtools.controlplane import ControlPlane
from handoff.attach.run import Attached, attach
from handoff.sim.cluster import Cluster
from handoff.sim.scenarios.base import Options, Scenario
from tests.k8s.staging import Staging

pytestmark = [pytest.mark.k8s, pytest.mark.slow]
NAMESPACE = "attach-test"
NODES = ("attach-a", "attach-b", "attach-c")


def _build(opts: Options) -> Cluster:
    cluster = Cluster(opts.cluster_config("attach-test"))
    for name in NODES:
        cluster.add_node(name, images=("nginx:1.27.3-alpine",))
    return cluster


SCENARIO = Scenario("attach-test", _build, None, "two attached nodes", attachable=True)


@pytest.fixture(scope="module")
def core(control_plane: ControlPlane) -> Iterator[k8s.CoreV1Api]:
    api = k8s_config.new_client_from_config(config_file=str(control_plane.admin_kubeconfig))
    yield k8s.CoreV1Api(api)
    api.close()


@pytest.fixture(scope="module")
def attached(
    control_plane: ControlPlane,
    core: k8s.CoreV1Api,
    staging: Staging,  # staged first: its nodes must register after situation (c)'s
) -> Iterator[Attached]:
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    run = attach(SCENARIO, Options(), str(control_plane.admin_kubeconfig))
    run.start()
    yield run
    run.stop()
    for name in NODES:
        for pod in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items:
            core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0
            )
        with contextlib.suppress(k8s.ApiException):
            core.delete_node(name)
    core.delete_namespace(NAMESPACE)


def until(check: Callable[[], Any], timeout: float = 60.0, what: str = "") -> Any:
    """The first truthy answer of ``check`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"not within {timeout:.0f}s: {what}")


def pod(name: str, *, node: str | None = None, selector: str | None = None, cpu: str = "100m"):
    spec: dict[str, Any] = {
        "containers": [
            {"name": "app", "image": "nginx:1.27.3-alpine", "resources": {"requests": {"cpu": cpu}}}
        ],
        "terminationGracePeriodSeconds": 30,
    }
    if node:
        spec["nodeName"] = node
    if selector:
        spec["nodeSelector"] = {"kubernetes.io/hostname": selector}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def events(core: k8s.CoreV1Api, name: str) -> list[k8s.CoreV1Event]:
    return core.list_namespaced_event(NAMESPACE, field_selector=f"involvedObject.name={name}").items


def test_nodes_register_ready_as_v1_20_kubelets_and_renew_their_leases(
    attached: Attached,
    core: k8s.CoreV1Api,
    control_plane: ControlPlane,
) -> None:
    leases = k8s.CoordinationV1Api(core.api_client)
    for name in NODES:
        node = until(lambda n=name: core.read_node(n), what=f"node {name}")
        assert node.status.node_info.kubelet_version == "v1.20.2"
        ready = {c.type: c.status for c in node.status.conditions}
        assert ready["Ready"] == "True"
    first = leases.read_namespaced_lease("attach-a", "kube-node-lease")
    assert first.spec.holder_identity == "attach-a"
    assert first.spec.lease_duration_seconds == 40
    assert first.metadata.owner_references[0].kind == "Node"
    until(
        lambda: (
            leases.read_namespaced_lease("attach-a", "kube-node-lease").spec.renew_time
            > first.spec.renew_time
        ),
        timeout=25,
        what="the lease renewed (every 10 s)",
    )


def test_a_pod_the_real_scheduler_binds_is_run_by_the_attached_kubelet(
    attached: Attached, core: k8s.CoreV1Api
) -> None:
    core.create_namespaced_pod(NAMESPACE, pod("scheduled", selector="attach-a"))
    running = until(
        lambda: (
            (p := core.read_namespaced_pod("scheduled", NAMESPACE)).status.phase == "Running" and p
        ),
        what="scheduled pod Running",
    )
    assert running.spec.node_name == "attach-a"
    conditions = {c.type: c.status for c in running.status.conditions}
    # A v1.20 kubelet writes no PodReadyToStartContainers (1.29+) and no PodHasNetwork.
    assert conditions == {
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    assert running.status.host_ip
    assert running.status.pod_ip
    assert running.status.start_time
    # The scheduler writes events.k8s.io/v1: its core view has an empty source.
    seen = {
        (e.reason, e.source.component or e.reporting_component) for e in events(core, "scheduled")
    }
    assert ("Scheduled", "default-scheduler") in seen
    assert {("Started", "kubelet"), ("Created", "kubelet")} <= seen


def test_admission_rejection_has_the_v1_20_shape(attached: Attached, core: k8s.CoreV1Api) -> None:
    core.create_namespaced_pod(NAMESPACE, pod("too-big", node="attach-b", cpu="100"))
    failed = until(
        lambda: (
            (p := core.read_namespaced_pod("too-big", NAMESPACE)).status.phase == "Failed" and p
        ),
        what="rejected pod Failed",
    )
    status = failed.status
    assert status.reason == "OutOfcpu"
    # rejectPod before 1.26: "Pod " + the message; no conditions, no hostIP, no qosClass
    # beyond what the API server set at creation.
    assert status.message.startswith("Pod Node didn't have enough resource: cpu, requested: ")
    assert not status.conditions
    assert status.host_ip is None
    assert status.start_time is not None
    warning = until(
        lambda: [e for e in events(core, "too-big") if e.reason == "OutOfcpu"],
        what="the rejection event",
    )[0]
    assert warning.type == "Warning"
    assert warning.source.component == "kubelet"
    assert warning.source.host == "attach-b"
    assert warning.message.startswith("Node didn't have enough resource: cpu")


def test_a_graceful_delete_is_finished_by_the_kubelet(
    attached: Attached, core: k8s.CoreV1Api
) -> None:
    core.create_namespaced_pod(NAMESPACE, pod("goes", node="attach-a"))
    until(
        lambda: core.read_namespaced_pod("goes", NAMESPACE).status.phase == "Running",
        what="pod Running",
    )
    core.delete_namespaced_pod("goes", NAMESPACE)  # grace 30: the kubelet must finish it
    until(
        lambda: not core.list_namespaced_pod(NAMESPACE, field_selector="metadata.name=goes").items,
        timeout=30,
        what="the kubelet's grace-0 delete",
    )
    assert "Killing" in {e.reason for e in events(core, "goes")}


def test_a_silent_kubelet_leaves_its_pod_pending_until_it_speaks_again(
    attached: Attached, core: k8s.CoreV1Api
) -> None:
    attached.call(attached.cluster.fault, "attach-b", "hang")
    core.create_namespaced_pod(NAMESPACE, pod("waits", node="attach-b"))
    time.sleep(5)
    waiting = core.read_namespaced_pod("waits", NAMESPACE)
    assert waiting.status.phase == "Pending"
    assert waiting.status.start_time is None
    assert not events(core, "waits")
    attached.call(attached.cluster.fault, "attach-b", "resume")
    until(
        lambda: core.read_namespaced_pod("waits", NAMESPACE).status.phase == "Running",
        what="pod Running once the kubelet resumed",
    )


def test_a_node_that_stops_heartbeating_renews_no_lease(
    attached: Attached, core: k8s.CoreV1Api
) -> None:
    leases = k8s.CoordinationV1Api(core.api_client)
    attached.call(attached.cluster.fault, "attach-b", "stop")
    time.sleep(1)
    stopped = leases.read_namespaced_lease("attach-b", "kube-node-lease").spec.renew_time
    time.sleep(12)
    assert leases.read_namespaced_lease("attach-b", "kube-node-lease").spec.renew_time == stopped
    attached.call(attached.cluster.fault, "attach-b", "resume")
    until(
        lambda: (
            leases.read_namespaced_lease("attach-b", "kube-node-lease").spec.renew_time > stopped
        ),
        timeout=25,
        what="renewals again after resume",
    )


def test_a_deleted_node_stays_deleted(attached: Attached, core: k8s.CoreV1Api) -> None:
    until(lambda: core.read_node("attach-c"), what="node attach-c")
    attached.call(attached.cluster.delete_node, "attach-c")
    until(
        lambda: not core.list_node(field_selector="metadata.name=attach-c").items,
        timeout=20,
        what="node attach-c deleted",
    )
    time.sleep(12)  # a status tick and a lease renewal later, nothing brought it back
    assert not core.list_node(field_selector="metadata.name=attach-c").items
