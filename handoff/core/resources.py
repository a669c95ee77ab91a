"""The Kubernetes resources Handoff reads, records or simulates: one table of resource name,
kind and API version, and the collection paths a client requests them at.

The live watchers (``live/sources``), the audit importer, the simulator's API server and its
discovery, and the attached simulator all name resources through this table.
"""

from __future__ import annotations

EVENTS_GROUP = "events.k8s.io/v1"

# resource -> (kind, apiVersion); events are also served as EVENTS_GROUP (events.k8s.io/v1).
RESOURCES: dict[str, tuple[str, str]] = {
    "pods": ("Pod", "v1"),
    "nodes": ("Node", "v1"),
    "events": ("Event", "v1"),
    "deployments": ("Deployment", "apps/v1"),
    "replicasets": ("ReplicaSet", "apps/v1"),
    "jobs": ("Job", "batch/v1"),
    "leases": ("Lease", "coordination.k8s.io/v1"),
}
KIND_OF: dict[str, str] = {resource: kind for resource, (kind, _) in RESOURCES.items()}
RESOURCE_OF: dict[str, str] = {kind: resource for resource, kind in KIND_OF.items()}
# What a cluster source watches and a trace records.
WATCHED = ("pods", "nodes", "events")
# What the simulator's API server stores (leases are kept apart, as renew times).
SIMULATED = ("pods", "nodes", "events", "deployments", "replicasets", "jobs")


def collection_path(resource: str, api_version: str | None = None, namespace: str = "") -> str:
    """``/api/v1/[namespaces/NS/]pods`` or ``/apis/GROUP/VERSION/[namespaces/NS/]RESOURCE``."""
    version = api_version or RESOURCES[resource][1]
    root = "/api/v1" if version == "v1" else f"/apis/{version}"
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"{root}{scope}/{resource}"
