"""Owner-level streams shaped as upstream shapes them (see tests/core/test_owners.py for
the upstream files): controllers' Events about their workloads, a Deployment's pods, and a
Deployment pinned to a node that does not exist; ``write_trace`` makes a trace of them for
the live, API and board tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from tests.core.k8sshapes import Script, core_event, micro, node, pod, running_status, second

QUOTA = (
    'Error creating: pods "web-5d8f7c9b6-{}" is forbidden: exceeded quota: compute,'
    " requested: pods=1, used: pods=4, limited: pods=4"
)
POD_SECURITY = (
    'create Pod db-0 in StatefulSet db failed error: pods "db-0" is forbidden: violates'
    ' PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "db"'
    " must set securityContext.allowPrivilegeEscalation=false)"
)
WEBHOOK_TIMEOUT = (
    'Error creating: Internal error occurred: failed calling webhook "policy.example.com":'
    ' failed to call webhook: Post "https://policy.svc:443/validate?timeout=10s": context'
    " deadline exceeded"
)
WEBHOOK_DENIED = (
    'Error creating: admission webhook "images.example.com" denied the request: image'
    " registry not allowed"
)


def owner_event(
    kind: str, name: str, reason: str, message: str, t: float, count: int = 1, first: float = 0
) -> dict[str, Any]:
    """A controller's core/v1 Event about its workload (tools/record: a repeat keeps the
    Event's name and bumps count and lastTimestamp)."""
    event = core_event(
        name,
        f"uid-{name}",
        reason,
        message,
        t,
        component=f"{kind.lower()}-controller",
        type_="Warning" if reason.startswith("Failed") else "Normal",
        kind=kind,
    )
    event["involvedObject"]["namespace"] = "default"
    event["metadata"]["name"] = f"{name}.{reason}"
    event["firstTimestamp"] = second(first or t)
    event["count"] = count
    return event


def series_event(kind: str, name: str, reason: str, note: str, t: float, count: int) -> dict:
    """An events.k8s.io/v1 Event (tools/events): ``regarding`` and ``note``, repeats in
    ``series``; the core/v1 fields stay empty."""
    return {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": f"{name}.{reason}", "namespace": "default", "uid": f"ev-{name}"},
        "eventTime": micro(t - 30),
        "regarding": {"kind": kind, "namespace": "default", "name": name, "uid": f"uid-{name}"},
        "reason": reason,
        "note": note,
        "type": "Warning",
        "reportingController": f"{kind.lower()}-controller",
        "series": {"count": count, "lastObservedTime": micro(t)},
    }


def deployment_pod(name: str, uid: str, t: float, node_name: str = "") -> dict[str, Any]:
    obj = pod(name, uid, t, node_name, owner=("ReplicaSet", "web-5d8f7c9b6"))
    obj["metadata"]["labels"] = {"app": "web", "pod-template-hash": "5d8f7c9b6"}
    return obj


def pinned_deployment(pods: int, every: float = 60.0) -> Script:
    """A Deployment whose template pins nodeName to a node that does not exist: each pod
    is created bound, PodGC deletes it as orphaned (gc_controller.go gcOrphaned, after its
    40 s quarantine), the ReplicaSet makes the next."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    for i in range(pods):
        t = 10 + i * every
        name, uid = f"web-5d8f7c9b6-p{i}", f"u-p{i}"
        script.add(t, "ADDED", deployment_pod(name, uid, t, "worker-9"))
        gone = deployment_pod(name, uid, t, "worker-9")
        gone["metadata"]["deletionTimestamp"] = second(t + 41)
        script.add(t + 41, "MODIFIED", gone)
        script.add(t + 41.1, "DELETED", gone)
    return script


def write_trace(path: Path, cluster: str = "owners") -> Path:
    """A quota-starved ReplicaSet, a PodSecurity-refused StatefulSet (events.k8s.io/v1), a
    Deployment pinned to a missing node (a loop of 5) and a healthy pod."""
    script = pinned_deployment(5)
    script.add(
        1,
        "ADDED",
        pod(
            "api-6f7d-k2j4h",
            "u-api",
            1,
            "worker-1",
            running_status(2),
            owner=("ReplicaSet", "api-6f7d"),
        ),
    )
    script.add(
        30, "ADDED", owner_event("ReplicaSet", "quota-7c9", "FailedCreate", QUOTA.format("x1"), 30)
    )
    script.add(31, "ADDED", series_event("StatefulSet", "db", "FailedCreate", POD_SECURITY, 31, 3))
    lines = [orjson.dumps({"handoff_trace": 1, "cluster": cluster, "source": "scripted"})]
    lines += [
        orjson.dumps({"observed": e.observed, "type": e.type, "object": e.object})
        for e in sorted(script.events, key=lambda e: e.observed)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path
