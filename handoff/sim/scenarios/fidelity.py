"""``fidelity``: a short scenario that shows, within 95 s, what the simulator and a real
control plane both do in the seed situations — scheduling, nodeName pinning,
FailedScheduling, kubelet admission rejections, a graceful delete the kubelet finishes,
a Deployment, PodGC of a nodeName typo, a node that stops heartbeating under a pod and its
NoExecute eviction, a node deleted under a running pod and PodGC's deletion.

``manage.py fidelity`` runs it on the built-in simulator and attached to a real control
plane and compares the two (docs/simulator.md). Nodes and pods are named ``fid-*`` and
live in ``default``, so a shared control plane's other objects are told apart.
"""

from __future__ import annotations

from handoff.sim.cluster import Cluster
from handoff.sim.objects import Obj
from handoff.sim.scenarios.base import Options
from handoff.sim.scenarios.manifests import NGINX, simple_pod

WORKER, PINNED, LOST, GONE = "fid-worker", "fid-pinned", "fid-lost", "fid-gone"
TOLERATION_S = 5  # the fragile pod's NoExecute toleration: evicted 5 s after the taint
# Pods from 3 s (a Node created through the API carries not-ready:NoSchedule until the
# node lifecycle controller's next pass, ~1 s), faults at 8 s. PodGC deletes the typo and
# the deleted node's pod 40-80 s later (a 40 s quarantine, then its 20 s tick, whose phase
# a real control plane does not share with the run): by 88 s; the lost node's pod is
# evicted ~55 s after it stops.
DURATION_S = 95.0


def _tolerating(seconds: int) -> list[Obj]:
    return [
        {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]


def _on(node: str) -> dict[str, str]:
    return {"kubernetes.io/hostname": node}


def fidelity(opts: Options) -> Cluster:
    cluster = Cluster(opts.cluster_config("sim-fidelity"))
    for name in (WORKER, PINNED, LOST, GONE):
        cluster.add_node(name, images=(NGINX,))
    at = cluster.at
    at(3.0, cluster.create_pod, simple_pod("fid-plain", cpu="100m", node_selector=_on(WORKER)))
    at(3.0, cluster.create_pod, simple_pod("fid-pinned", node_name=PINNED, cpu="100m"))
    at(3.0, cluster.create_pod, simple_pod("fid-picky", node_selector={"disktype": "nvme"}))
    at(3.0, cluster.create_pod, simple_pod("fid-typo", node_name="fid-missing"))
    at(4.0, cluster.create_pod, simple_pod("fid-bigcpu", node_name=PINNED, cpu="100"))
    at(4.0, cluster.create_pod, simple_pod("fid-bigmem", node_name=PINNED, memory="100Gi"))
    at(
        2.0,
        cluster.create_pod,
        simple_pod("fid-badsel", node_name=PINNED, node_selector={"disktype": "ssd"}),
    )
    fragile = simple_pod(
        "fid-fragile", cpu="100m", node_selector=_on(LOST), tolerations=_tolerating(TOLERATION_S)
    )
    at(3.0, cluster.create_pod, fragile)
    at(3.0, cluster.create_pod, simple_pod("fid-doomed", cpu="100m", node_selector=_on(GONE)))
    template = {"metadata": {"labels": {"app": "fid-web"}}, "spec": _web_spec()}
    at(3.0, cluster.deployments.apply, "default", "fid-web", template, 2)
    # Running by now: a graceful delete the kubelet finishes; a node that stops
    # heartbeating (the node lifecycle controller's 40 s, then the taint manager); a node
    # deleted under its running pod (PodGC).
    at(8.0, cluster.delete_pod, "default", "fid-plain")
    at(8.0, cluster.fault, LOST, "stop")
    at(8.0, cluster.delete_node, GONE)
    return cluster


def _web_spec() -> Obj:
    return simple_pod("web", cpu="50m", node_selector=_on(WORKER))["spec"]
