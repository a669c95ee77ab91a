"""Manifests the scenarios share: kubeadm's static control plane, kindnet, CoreDNS, pods."""

from __future__ import annotations

from typing import Any

from handoff.sim.cluster import Cluster
from handoff.sim.objects import Obj, container, pod, pod_spec

NGINX = "nginx:1.27.3-alpine"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
CONTROL_PLANE_IMAGES = (
    "registry.k8s.io/etcd:3.5.21-0",
    "registry.k8s.io/kube-apiserver:v1.33.1",
    "registry.k8s.io/kube-controller-manager:v1.33.1",
    "registry.k8s.io/kube-scheduler:v1.33.1",
    "registry.k8s.io/coredns/coredns:v1.12.0",
    "docker.io/kindest/kindnetd:v20250512-df8de77b",
    "registry.k8s.io/kube-proxy:v1.33.1",
)


def static_manifests() -> list[Obj]:
    """kubeadm's control plane as static pods in /etc/kubernetes/manifests."""
    out = []
    for name, image, cpu in (
        ("etcd", CONTROL_PLANE_IMAGES[0], "100m"),
        ("kube-apiserver", CONTROL_PLANE_IMAGES[1], "250m"),
        ("kube-controller-manager", CONTROL_PLANE_IMAGES[2], "200m"),
        ("kube-scheduler", CONTROL_PLANE_IMAGES[3], "100m"),
    ):
        spec = pod_spec([container(name, image, cpu=cpu)])
        spec["hostNetwork"] = True
        spec["priorityClassName"] = "system-node-critical"
        spec["priority"] = 2000001000
        spec["tolerations"] = [{"operator": "Exists", "effect": "NoExecute"}]
        out.append(
            pod(name, "kube-system", spec, labels={"component": name, "tier": "control-plane"})
        )
    return out


def control_plane(cluster: Cluster, name: str = "control-plane") -> None:
    cluster.add_node(
        name,
        labels={
            "node-role.kubernetes.io/control-plane": "",
            "node.kubernetes.io/exclude-from-external-load-balancers": "",
        },
        taints=[CONTROL_PLANE_TAINT],
        static_pods=static_manifests(),
        images=CONTROL_PLANE_IMAGES,
    )


def kindnet(cluster: Cluster, node_name: str) -> None:
    spec = pod_spec([container("kindnet-cni", CONTROL_PLANE_IMAGES[5], cpu="100m", memory="50Mi")])
    cluster.daemon_pod("kindnet", node_name, spec, labels={"app": "kindnet", "k8s-app": "kindnet"})


def coredns(cluster: Cluster) -> None:
    spec = pod_spec(
        [container("coredns", CONTROL_PLANE_IMAGES[4], cpu="100m", memory="70Mi")],
        node_selector={"node-role.kubernetes.io/control-plane": ""},
        tolerations=[
            {"key": "CriticalAddonsOnly", "operator": "Exists"},
            {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
        ],
    )
    template = {"metadata": {"labels": {"k8s-app": "kube-dns"}}, "spec": spec}
    cluster.deployments.apply("kube-system", "coredns", template, 2)


def simple_pod(
    name: str,
    *,
    namespace: str = "default",
    node_name: str | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    image: str = NGINX,
    node_selector: dict[str, str] | None = None,
    **extra: Any,
) -> Obj:
    spec = pod_spec(
        [container(name if "-" not in name else "app", image, cpu, memory)],
        node_name=node_name,
        node_selector=node_selector,
        **extra,
    )
    return pod(name, namespace, spec, labels={"run": name})
