"""Watch events shaped as the Kubernetes source shapes them, for fidelity tests.

Each builder names the upstream code whose output it copies; times are seconds after
``T0`` (watch receive times, microsecond precision), object timestamps are whole seconds
as the API server writes them.
"""

from __future__ import annotations

from typing import Any

from handoff.core.report import build_report
from handoff.core.timeline import Timeline, fold
from handoff.core.trace import WatchEvent, format_time

T0 = 1_780_000_000.0


def micro(t: float) -> str:
    return format_time(T0 + t)


def second(t: float) -> str:
    """An object timestamp: RFC 3339 to the second (metav1.Time)."""
    return format_time(T0 + t)[:19] + "Z"


def cond(kind: str, status: str, t: float, reason: str = "", message: str = "") -> dict:
    found = {"type": kind, "status": status, "lastTransitionTime": second(t)}
    if reason:
        found["reason"] = reason
    if message:
        found["message"] = message
    return found


class Script:
    """A cluster's watch streams, in the order a watcher received them."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self.rv = 1000

    def add(self, t: float, type_: str, obj: dict[str, Any]) -> Script:
        self.rv += 1
        obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self.events.append(WatchEvent(micro(t), type_, obj))
        return self

    def fold(self, until: float | None = None) -> Timeline:
        return fold(self.events, until=None if until is None else T0 + until)

    def report(self, at: float, stuck_after: float = 60.0) -> dict[str, Any]:
        """The triage report at ``at``, of what was received by then."""
        return build_report(self.fold(until=at), at=T0 + at, stuck_after=stuck_after)

    def view(self, name: str, at: float, uid: str | None = None, **kw: Any) -> dict[str, Any]:
        pods = [
            p
            for p in self.report(at, **kw)["pods"]
            if p["name"] == name and (uid is None or p["uid"] == uid)
        ]
        assert len(pods) == 1, pods
        return pods[0]


def node(
    name: str,
    created: float,
    ready: str = "True",
    since: float | None = None,
    reason: str = "KubeletReady",
    message: str = "kubelet is posting ready status",
    taints: list[dict] | None = None,
) -> dict[str, Any]:
    """A Node as the kubelet registers it and posts its status (nodestatus/setters.go)."""
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": second(created)},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "conditions": [
                cond("Ready", ready, created if since is None else since, reason, message)
            ]
        },
    }


def pod(
    name: str,
    uid: str,
    created: float,
    node_name: str = "",
    status: dict[str, Any] | None = None,
    deletion: float | None = None,
    finalizers: list[str] | None = None,
    owner: tuple[str, str] | None = ("ReplicaSet", "web-5d8f7c9b6"),
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod; ``status`` defaults to what registry/core/pod/strategy.go PrepareForCreate
    leaves: ``{phase: Pending}``."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid,
        "creationTimestamp": second(created),
    }
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "controller": True}]
    if deletion is not None:
        meta["deletionTimestamp"] = second(deletion)
    if finalizers:
        meta["finalizers"] = finalizers
    if annotations:
        meta["annotations"] = annotations
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": meta,
        "spec": {"nodeName": node_name} if node_name else {},
        "status": status or {"phase": "Pending", "qosClass": "BestEffort"},
    }


def running_status(start: float, sandbox: bool = True) -> dict[str, Any]:
    """The kubelet's status of a running pod (kubelet_pods.go generateAPIPodStatus);
    ``sandbox``: PodReadyToStartContainers, written by default from 1.29 only."""
    conditions = [
        cond("Initialized", "True", start),
        cond("Ready", "True", start + 2),
        cond("ContainersReady", "True", start + 2),
        cond("PodScheduled", "True", start - 1),
    ]
    if sandbox:
        conditions.insert(0, cond("PodReadyToStartContainers", "True", start + 1))
    return {
        "phase": "Running",
        "hostIP": "10.0.0.2",
        "startTime": second(start),
        "conditions": conditions,
        "containerStatuses": [{"state": {"running": {"startedAt": second(start + 2)}}}],
    }


def failed_status(start: float, reason: str, message: str, **extra: Any) -> dict[str, Any]:
    status = {"phase": "Failed", "reason": reason, "message": message, "startTime": second(start)}
    status.update(extra)
    return status


def core_event(
    name: str,
    uid: str | None,
    reason: str,
    message: str,
    t: float,
    component: str = "kubelet",
    host: str = "",
    type_: str = "Normal",
    kind: str = "Pod",
) -> dict[str, Any]:
    """A core/v1 Event as client-go tools/record makeEvent writes it."""
    regarding: dict[str, Any] = {"kind": kind, "name": name}
    if kind == "Pod":
        regarding["namespace"] = "default"
    if uid:
        regarding["uid"] = uid
    source = {"component": component}
    if host:
        source["host"] = host
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"{name}.{reason}.{int(t * 1000)}", "namespace": "default"},
        "involvedObject": regarding,
        "reason": reason,
        "message": message,
        "type": type_,
        "source": source,
        "firstTimestamp": second(t),
        "lastTimestamp": second(t),
        "count": 1,
    }
