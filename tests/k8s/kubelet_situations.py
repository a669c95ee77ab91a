"""The seed situations that need kubelets, staged at once on four nodes of the simulator's
kubelets attached to the real control plane (``simulate --attach``): admission
rejections on ``kl-ok``, a silent kubelet on ``kl-hang`` (heartbeats going on), a running
pod's node that stops heartbeating (``kl-lost``) and one that is deleted (``kl-gone``).
test_kubelet_situations.py asserts what Handoff answers; tests/k8s/staging.py stages them
with test_situations.py's so the controllers' clocks run side by side.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from kubernetes import client as k8s

from devtools import controlplane
from devtools.controlplane import ControlPlane
from handoff.attach.run import Attached, attach
from handoff.sim.cluster import Cluster
from handoff.sim.scenarios.base import Options, Scenario
from tests.conftest import wait_until
from tests.k8s.situations import _settled

IMAGE = "nginx:1.27.3-alpine"  # pre-pulled on every attached node
OK, HANG, LOST, GONE = "kl-ok", "kl-hang", "kl-lost", "kl-gone"
NODES = (OK, HANG, LOST, GONE)
TOLERATION_S = 10
# Deleted by the taint manager with the pod's own grace period: long enough that the pod
# is still `evicted` (not yet `stuck-terminating`) when the test reads it.
EVICTED_GRACE_S = 300


def _build(opts: Options) -> Cluster:
    cluster = Cluster(opts.cluster_config("kubelet-situations"))
    for name in NODES:
        cluster.add_node(name, images=(IMAGE,))
    return cluster


SCENARIO = Scenario("kubelet-situations", _build, None, "four attached nodes", attachable=True)


def pod(name: str, *, node: str = "", on: str = "", **extra: Any) -> dict[str, Any]:
    """A pod pinned with ``nodeName`` (``node``) or placed by the scheduler (``on``)."""
    requests = extra.pop("requests", {"cpu": "100m"})
    spec: dict[str, Any] = {
        "containers": [{"name": "app", "image": IMAGE, "resources": {"requests": requests}}],
        **extra,
    }
    if node:
        spec["nodeName"] = node
    if on:
        spec["nodeSelector"] = {"kubernetes.io/hostname": on}
    return {"metadata": {"name": name}, "spec": spec}


def _tolerating(seconds: int) -> list[dict[str, Any]]:
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]


PODS = {
    "kl-rejected": [
        pod("bigcpu", node=OK, requests={"cpu": "100"}),
        pod("bigmem", node=OK, requests={"memory": "100Gi"}),
        pod("badsel", node=OK, nodeSelector={"disktype": "ssd"}),
    ],
    "kl-silent": [pod("waits", on=HANG)],
    "kl-lost": [
        pod(
            "fragile",
            on=LOST,
            tolerations=_tolerating(TOLERATION_S),
            terminationGracePeriodSeconds=EVICTED_GRACE_S,
        )
    ],
    "kl-gone": [pod("orphan", on=GONE)],
}


@contextlib.contextmanager
def staged(core: k8s.CoreV1Api, plane: ControlPlane) -> Iterator[Attached]:
    """The kubelets attached and every situation staged; the kubelets stop on exit (their
    nodes and pods stay: the staging lasts as long as the k8s tests' control plane)."""
    kubelets = attach(SCENARIO, Options(), str(plane.admin_kubeconfig))
    kubelets.start()
    try:
        _stage(core, kubelets)
        yield kubelets
    finally:
        kubelets.stop()


def _stage(core: k8s.CoreV1Api, kubelets: Attached) -> None:
    """Nodes settled, then every pod at once; the faults once their pods are running."""
    for namespace in PODS:
        core.create_namespace({"metadata": {"name": namespace}})
    for node in NODES:
        wait_until(lambda n=node: _exists(core, n) and _settled(core, n), 60, f"{node} settled")
    for namespace in PODS:
        controlplane.wait_default_account(core, namespace)
    kubelets.call(kubelets.cluster.fault, HANG, "hang")
    for namespace, pods in PODS.items():
        for body in pods:
            core.create_namespaced_pod(namespace, body)
    wait_until(lambda: _phase(core, "kl-lost", "fragile") == "Running", 60, "fragile running")
    wait_until(lambda: _phase(core, "kl-gone", "orphan") == "Running", 60, "orphan running")
    kubelets.call(kubelets.cluster.fault, LOST, "stop")
    kubelets.call(kubelets.cluster.delete_node, GONE)


def _exists(core: k8s.CoreV1Api, node: str) -> bool:
    return bool(core.list_node(field_selector=f"metadata.name={node}").items)


def _phase(core: k8s.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).status.phase
