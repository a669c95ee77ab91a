"""The seed situations that need kubelets, on a real v1.20.2 control plane with the
simulator's kubelets attached (``simulate --attach``), read through the path a user takes:
``clusters add NAME --kubeconfig … --start`` → Celery watch streams (as deploy/rbac.yaml's
service account) → Redis → ``/api``. One test per situation asserts verdict, binding, node
and reason; the same run, ``record``ed, triages offline to the same answers.

- kubelet admission rejections, shaped as a v1.20 kubelet shapes them (OutOfcpu,
  OutOfmemory, NodeAffinity: ``Pod <message>``, no conditions, no hostIP);
- a pod bound by the scheduler to a node whose kubelet is silent (it heartbeats);
- a running pod's node stops heartbeating: the real node lifecycle controller taints it,
  the real taint manager evicts the pod (its toleration: 10 s);
- a node deleted under a running pod: the real PodGC deletes the pod (v1.20: grace 0, no
  status, no event), which is ``podgc-deleted``, not a plain ``deleted``.

Everything is staged at the start of the module so the controllers' 40-60 s run side by
side. What the control plane did is written down in docs/real-control-plane.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from devtools.controlplane import ControlPlane
from handoff.attach.run import Attached, attach
from handoff.sim.cluster import Cluster
from handoff.sim.scenarios.base import Options, Scenario
from tests.conftest import wait_until
from tests.k8s.situations import _has_default_account, _settled
from tests.k8s.stack import SETTINGS, Stack, answer, api_pods, assert_offline_agrees, wait_for

CLUSTER = "kubelets"
IMAGE = "nginx:1.27.3-alpine"  # pre-pulled on every attached node
OK, HANG, LOST, GONE = "kl-ok", "kl-hang", "kl-lost", "kl-gone"
NODES = (OK, HANG, LOST, GONE)
STUCK_AFTER = float(SETTINGS["HANDOFF_STUCK_AFTER"])
TOLERATION_S = 10
# Deleted by the taint manager with the pod's own grace period: long enough that the pod
# is still `evicted` (not yet `stuck-terminating`) when the test reads it.
EVICTED_GRACE_S = 300

EXPECTED = {
    "rejected": {
        "bigcpu": ("rejected", "manual", OK, "OutOfcpu"),
        "bigmem": ("rejected", "manual", OK, "OutOfmemory"),
        "badsel": ("rejected", "manual", OK, "NodeAffinity"),
    },
    "silent": {"waits": ("stuck", "scheduler", HANG, "kubelet-silent")},
    "lost": {"fragile": ("evicted", "scheduler", LOST, "TaintManagerEviction")},
    "gone": {"orphan": ("podgc-deleted", "scheduler", GONE, "orphaned")},
}


def _build(opts: Options) -> Cluster:
    cluster = Cluster(opts.cluster_config("kubelet-situations"))
    for name in NODES:
        cluster.add_node(name, images=(IMAGE,))
    return cluster


SCENARIO = Scenario("kubelet-situations", _build, None, "four attached nodes", attachable=True)


@dataclass
class Run:
    stack: Stack
    kubelets: Attached
    core: k8s.CoreV1Api
    tmp: Path


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
    "rejected": [
        pod("bigcpu", node=OK, requests={"cpu": "100"}),
        pod("bigmem", node=OK, requests={"memory": "100Gi"}),
        pod("badsel", node=OK, nodeSelector={"disktype": "ssd"}),
    ],
    "silent": [pod("waits", on=HANG)],
    "lost": [
        pod(
            "fragile",
            on=LOST,
            tolerations=_tolerating(TOLERATION_S),
            terminationGracePeriodSeconds=EVICTED_GRACE_S,
        )
    ],
    "gone": [pod("orphan", on=GONE)],
}


@pytest.fixture(scope="module")
def run(
    stack: Stack,
    reader_kubeconfig: Path,
    admin: k8s.ApiClient,
    control_plane: ControlPlane,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Run]:
    core = k8s.CoreV1Api(admin)
    stack.add_cluster(CLUSTER, reader_kubeconfig)
    kubelets = attach(SCENARIO, Options(), str(control_plane.admin_kubeconfig))
    kubelets.start()
    try:
        _stage(core, kubelets)
        yield Run(stack, kubelets, core, tmp_path_factory.mktemp("kubelet-situations"))
    finally:
        kubelets.stop()
        _clean_up(core)
        stack.remove_cluster(CLUSTER)


def _stage(core: k8s.CoreV1Api, kubelets: Attached) -> None:
    """Nodes settled, then every pod at once; the faults once their pods are running."""
    for namespace in PODS:
        core.create_namespace({"metadata": {"name": namespace}})
    for node in NODES:
        wait_until(lambda n=node: _exists(core, n) and _settled(core, n), 60, f"{node} settled")
    for namespace in PODS:
        wait_until(lambda ns=namespace: _has_default_account(core, ns), 30, "accounts")
    kubelets.call(kubelets.cluster.fault, HANG, "hang")
    for namespace, pods in PODS.items():
        for body in pods:
            core.create_namespaced_pod(namespace, body)
    wait_until(lambda: _phase(core, "lost", "fragile") == "Running", 60, "fragile running")
    wait_until(lambda: _phase(core, "gone", "orphan") == "Running", 60, "orphan running")
    kubelets.call(kubelets.cluster.fault, LOST, "stop")
    kubelets.call(kubelets.cluster.delete_node, GONE)


def _clean_up(core: k8s.CoreV1Api) -> None:
    """Nothing left for later modules' schedulers to count (their FailedScheduling texts
    name the number of nodes)."""
    for namespace in PODS:
        for found in core.list_namespaced_pod(namespace).items:
            with contextlib.suppress(k8s.ApiException):
                core.delete_namespaced_pod(found.metadata.name, namespace, grace_period_seconds=0)
        with contextlib.suppress(k8s.ApiException):
            core.delete_namespace(namespace)
    for node in NODES:
        with contextlib.suppress(k8s.ApiException):
            core.delete_node(node)


def _exists(core: k8s.CoreV1Api, node: str) -> bool:
    return bool(core.list_node(field_selector=f"metadata.name={node}").items)


def _phase(core: k8s.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).status.phase


def settle(
    run: Run, namespace: str, ok: Callable[[list[dict[str, Any]]], bool], timeout: float
) -> dict[str, dict[str, Any]]:
    """The namespace's pod views by name, once ``ok`` holds for them."""
    views = wait_for(
        lambda: api_pods(run.stack, CLUSTER, namespace)[1], ok, timeout, f"situation {namespace}"
    )
    return {v["name"]: v for v in views}


def verdicts(*wanted: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda views: bool(views) and all(v["verdict"] in wanted for v in views)


def test_kubelet_admission_rejections_are_rejected_with_the_kubelets_reason(run: Run) -> None:
    views = settle(run, "rejected", lambda vs: len(vs) == 3 and verdicts("rejected")(vs), 60)
    assert {name: answer(view) for name, view in views.items()} == EXPECTED["rejected"]
    bigcpu = views["bigcpu"]
    assert (
        "Node didn't have enough resource: cpu, requested: 100000"
        in (bigcpu["rejection"]["message"])
    )
    # The kubelet's Warning event, without the "Pod " prefix its status message has (v1.20).
    warning = [e for e in bigcpu["events"] if e["reason"] == "OutOfcpu"]
    assert warning
    assert warning[0]["message"].startswith("Node didn't have enough resource: cpu")
    assert "Predicate NodeAffinity failed" in views["badsel"]["rejection"]["message"]
    assert_offline_agrees(run.stack, CLUSTER, "rejected", run.tmp)


def test_a_pod_bound_to_a_silent_kubelet_is_stuck(run: Run) -> None:
    views = settle(run, "silent", verdicts("stuck"), STUCK_AFTER + 60)
    waits = views["waits"]
    assert answer(waits) == EXPECTED["silent"]["waits"]
    assert waits["node_exists"] is True
    assert [e["reason"] for e in waits["events"]] == ["Scheduled"]
    assert_offline_agrees(run.stack, CLUSTER, "silent", run.tmp)


def test_a_running_pods_node_lost_then_the_noexecute_eviction(run: Run) -> None:
    grace = 40 + 5 + 5 + TOLERATION_S  # node monitor grace + period + NoExecute + toleration
    views = settle(run, "lost", verdicts("evicted"), grace + 90)
    fragile = views["fragile"]
    assert answer(fragile) == EXPECTED["lost"]["fragile"]
    assert fragile["milestones"]["running"] is not None
    assert fragile["milestones"]["deleted"] is None  # Terminating: no kubelet to finish it
    assert "TaintManagerEviction" in [e["reason"] for e in fragile["events"]]
    assert_offline_agrees(run.stack, CLUSTER, "lost", run.tmp)


def test_a_node_deleted_under_a_running_pod_is_podgc_deleted(run: Run) -> None:
    # PodGC (v1.20): the node name quarantined 40 s, then the next 20 s tick.
    views = settle(run, "gone", verdicts("podgc-deleted"), 40 + 20 + 60)
    orphan = views["orphan"]
    assert answer(orphan) == EXPECTED["gone"]["orphan"]
    assert orphan["node_exists"] is False
    assert orphan["milestones"]["running"] is not None
    assert "was deleted while the pod was on it" in orphan["explanation"]
    assert_offline_agrees(run.stack, CLUSTER, "gone", run.tmp)
