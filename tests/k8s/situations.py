"""The seed situations a real control plane can show without a kubelet, staged at once
(each in its own namespace) so the slow ones run side by side: PodGC needs 40-80 s,
the node lifecycle controller 40 s plus the pod's tolerationSeconds.

Each is what a user does with ``kubectl`` as admin; the control plane does the rest. The
seed situations that need a kubelet (its admission rejection, a node deleted under running
pods, ...) are staged with ``simulate --attach``'s kubelets in test_kubelet_situations.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from devtools import controlplane
from tests.conftest import wait_until
from tests.k8s.nodes import NodeAgent

IMAGE = "registry.k8s.io/pause:3.2"  # never pulled: no kubelet ever runs these pods
SILENT = "silent-1"  # Ready, Lease renewed, no kubelet
TAINTED = "tainted-1"  # the same, tainted dedicated=infra:NoSchedule
LOST = "lost-1"  # Ready until its Lease stops being renewed, right after binding
MISSING = "worker-99"  # no such node
GONE = "worker-gone"  # no such node either
TAINT = {"key": "dedicated", "value": "infra", "effect": "NoSchedule"}
TOLERATION_S = 10  # (e): evicted this long after the NoExecute taint, not 300 s


@dataclass(frozen=True)
class Situation:
    key: str
    namespace: str
    what: str


SITUATIONS = {
    s.key: s
    for s in (
        Situation("a", "typo", "nodeName names a node that does not exist; PodGC deletes it"),
        Situation("b", "silent", "bound by the scheduler to a Ready node whose kubelet is silent"),
        Situation("c", "unschedulable", "no node matches its nodeSelector: FailedScheduling"),
        Situation("d", "taint-bypass", "nodeName bypasses a NoSchedule taint: bound, waiting"),
        Situation(
            "e", "node-lost", "its node stops heartbeating after binding: NoExecute eviction"
        ),
        Situation("f", "pinned-deploy", "a Deployment's template pins a missing node: PodGC loop"),
        Situation("g", "terminating", "deleted gracefully on a node whose kubelet never finishes"),
    )
}


# What Handoff should answer for each situation's pod once it has played out: (verdict,
# binding, node, reason). The live tests and the offline test of the recorded trace share
# it. (f): every pod of the loop but the newest, which waits on the missing node (its
# reason `node-missing`, `awaiting-kubelet` until 30 s old, then `stuck`).
EXPECTED = {
    "a": {"web": ("podgc-deleted", "manual", MISSING, "orphaned")},
    "b": {"api": ("stuck", "scheduler", SILENT, "kubelet-silent")},
    "c": {"picky": ("unscheduled", None, None, "Unschedulable")},
    "d": {"pinned": ("stuck", "manual", TAINTED, "kubelet-silent")},
    "e": {"fragile": ("evicted", "scheduler", LOST, "TaintManagerEviction")},
    "f": {"deleted": ("podgc-deleted", "manual", GONE, "orphaned")},
    # Wrong today (issue 17): reported `deleted`.
    "g": {"draining": ("stuck-terminating", "scheduler", SILENT, "kubelet-silent")},
}


def pod(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": IMAGE}], **(spec or {})},
    }


def on(node: str) -> dict[str, Any]:
    return {"nodeSelector": {"kubernetes.io/hostname": node}}


@dataclass
class Staged:
    """What was staged, and when (time.time() of the first object of each situation)."""

    started: dict[str, float]
    pods: dict[str, str]  # situation key -> pod name (the Deployment's: its name)


def stage(admin: k8s.ApiClient, agent: NodeAgent) -> Staged:
    """Register the nodes, then create every situation's objects; return once the
    ones that must be bound first are (e's node then goes silent, g's pod is deleted)
    and c's first FailedScheduling is written: its message counts the cluster's nodes,
    so other tests' nodes may register from then on."""
    core = k8s.CoreV1Api(admin)
    for situation in SITUATIONS.values():
        core.create_namespace({"metadata": {"name": situation.namespace}})
    agent.add(SILENT)
    agent.add(TAINTED, taints=[TAINT])
    agent.add(LOST)
    # Nodes that have been up a while, not nodes that just joined: their registration taint
    # gone, and in an earlier second than the pods' (1 s) creation times. Pods bound to a
    # node in the second it joined are another situation (registration-taint.jsonl.gz).
    for node in (SILENT, TAINTED, LOST):
        wait_until(lambda n=node: _settled(core, n), 60, f"{node}'s registration taint to go")
    time.sleep(2.0)
    for situation in SITUATIONS.values():  # pods need the namespace's default account
        controlplane.wait_default_account(core, situation.namespace)
    started: dict[str, float] = {}
    names = {}
    for key, create in CREATE.items():
        started[key] = time.time()
        names[key] = create(admin, SITUATIONS[key].namespace)
    wait_until(lambda: _node_of(core, "node-lost", names["e"]) == LOST, 30, "e's pod to be bound")
    agent.silence(LOST)
    wait_until(lambda: _node_of(core, "terminating", names["g"]) == SILENT, 30, "g's pod bound")
    # Its Scheduled event written first (the scheduler writes events asynchronously): that
    # nothing came after the deletion request is what makes it `kubelet-silent`.
    g, c = ("terminating", names["g"]), ("unschedulable", names["c"])
    wait_until(lambda: _has_event(core, *g, "Scheduled"), 30, "g's Scheduled event")
    core.delete_namespaced_pod(names["g"], "terminating")
    wait_until(lambda: _has_event(core, *c, "FailedScheduling"), 30, "c's FailedScheduling")
    return Staged(started, names)


def _typo(admin: k8s.ApiClient, ns: str) -> str:
    k8s.CoreV1Api(admin).create_namespaced_pod(ns, pod("web", {"nodeName": MISSING}))
    return "web"


def _silent(admin: k8s.ApiClient, ns: str) -> str:
    k8s.CoreV1Api(admin).create_namespaced_pod(ns, pod("api", on(SILENT)))
    return "api"


def _unschedulable(admin: k8s.ApiClient, ns: str) -> str:
    spec = {"nodeSelector": {"disktype": "nvme"}}
    k8s.CoreV1Api(admin).create_namespaced_pod(ns, pod("picky", spec))
    return "picky"


def _taint_bypass(admin: k8s.ApiClient, ns: str) -> str:
    k8s.CoreV1Api(admin).create_namespaced_pod(ns, pod("pinned", {"nodeName": TAINTED}))
    return "pinned"


def _node_lost(admin: k8s.ApiClient, ns: str) -> str:
    tolerations = [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOLERATION_S}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]
    spec = {**on(LOST), "tolerations": tolerations}
    k8s.CoreV1Api(admin).create_namespaced_pod(ns, pod("fragile", spec))
    return "fragile"


def _pinned_deployment(admin: k8s.ApiClient, ns: str) -> str:
    template = pod("ghost-web", {"nodeName": GONE})
    deployment = {
        "metadata": {"name": "ghost-web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "ghost-web"}},
            "template": template,
        },
    }
    k8s.AppsV1Api(admin).create_namespaced_deployment(ns, deployment)
    return "ghost-web"


def _terminating(admin: k8s.ApiClient, ns: str) -> str:
    spec = {**on(SILENT), "terminationGracePeriodSeconds": 10}
    k8s.CoreV1Api(admin).create_namespaced_pod(ns, pod("draining", spec))
    return "draining"


CREATE: dict[str, Callable[[k8s.ApiClient, str], str]] = {
    "a": _typo,
    "b": _silent,
    "c": _unschedulable,
    "d": _taint_bypass,
    "e": _node_lost,
    "f": _pinned_deployment,
    "g": _terminating,
}


def _settled(core: k8s.CoreV1Api, name: str) -> bool:
    """The node lifecycle controller has removed ``node.kubernetes.io/not-ready:NoSchedule``,
    which a Node gets when it is created (v1.20: the TaintNodesByCondition admission
    plugin), now that the node is Ready."""
    taints = core.read_node(name).spec.taints or []
    return all(t.key != "node.kubernetes.io/not-ready" for t in taints)


def _has_event(core: k8s.CoreV1Api, namespace: str, name: str, reason: str) -> bool:
    """An event of that reason about the pod is in the API."""
    found = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}")
    return any(e.reason == reason for e in found.items)


def _node_of(core: k8s.CoreV1Api, namespace: str, name: str) -> str | None:
    return core.read_namespaced_pod(name, namespace).spec.node_name
