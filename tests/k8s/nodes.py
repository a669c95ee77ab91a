"""Nodes without kubelets: what the node lifecycle controller needs to see, and no more.

A kubelet registers its Node, posts its status (Ready, capacity) and renews its Lease in
``kube-node-lease`` every 10 s (v1.20: ``--node-lease-duration-seconds`` 40, renewal a
quarter of it). ``NodeAgent`` does exactly that from a thread, as admin, and nothing else:
no pod on these nodes is ever acknowledged, so each is a node whose kubelet is silent.
``silence(name)`` stops one node's renewals: the controller then finds it unreachable
after its grace period (40 s), as when a machine dies.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import urllib3
from kubernetes import client as k8s

LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40
RENEW_EVERY_S = 10.0
CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}
KUBELET_VERSION = "v1.20.2"


def now_micro() -> str:
    """A MicroTime as the API server writes it (RFC 3339, microseconds, Z)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def now_seconds() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_status() -> dict[str, Any]:
    """A freshly registered, Ready node's status (the kubelet's first post)."""
    stamp = now_seconds()
    conditions = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    return {
        "capacity": CAPACITY,
        "allocatable": CAPACITY,
        "conditions": [
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": "kubelet is posting ready status" if kind == "Ready" else reason,
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
            for kind, status, reason in conditions
        ],
        "nodeInfo": {"kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION},
    }


class NodeAgent:
    """Registers Nodes and renews their Leases every 10 s from a thread, until stopped."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.core = k8s.CoreV1Api(api)
        self.leases = k8s.CoordinationV1Api(api)
        self.renewing: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, daemon=True, name="leases")
        self._thread.start()

    def add(
        self,
        name: str,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> None:
        """Register a Ready node (its object, its status, its Lease) and keep it alive."""
        meta = {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}}
        node = self.core.create_node({"metadata": meta, "spec": {"taints": taints or []}})
        self.core.patch_node_status(
            name, {"status": node_status()}, _content_type="application/merge-patch+json"
        )
        owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.metadata.uid}
        lease = {
            "metadata": {"name": name, "ownerReferences": [owner]},
            "spec": {
                "holderIdentity": name,
                "leaseDurationSeconds": LEASE_DURATION_S,
                "renewTime": now_micro(),
            },
        }
        self.leases.create_namespaced_lease(LEASE_NAMESPACE, lease)
        with self._lock:
            self.renewing.add(name)

    def silence(self, name: str) -> None:
        """Stop renewing the node's Lease: its kubelet "dies" now."""
        with self._lock:
            self.renewing.discard(name)

    def renew(self, name: str) -> None:
        body = {"spec": {"renewTime": now_micro()}}
        self.leases.patch_namespaced_lease(
            name, LEASE_NAMESPACE, body, _content_type="application/merge-patch+json"
        )

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _renew_loop(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            with self._lock:
                names = sorted(self.renewing)
            for name in names:
                try:
                    self.renew(name)
                except (k8s.ApiException, urllib3.exceptions.HTTPError, OSError):
                    continue  # the API server may be restarting: the next round retries
