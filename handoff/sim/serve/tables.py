"""Server-side printing: the Table that `kubectl get` asks for (``as=Table``), with the
columns of ``pkg/printers/internalversion/printers.go`` for each kind served."""

from __future__ import annotations

from typing import Any

from handoff.sim.objects import Obj, parse_stamp

POD_COLUMNS = [
    ("Name", "string", 0),
    ("Ready", "string", 0),
    ("Status", "string", 0),
    ("Restarts", "string", 0),
    ("Age", "string", 0),
    ("IP", "string", 1),
    ("Node", "string", 1),
    ("Nominated Node", "string", 1),
    ("Readiness Gates", "string", 1),
]
NODE_COLUMNS = [
    ("Name", "string", 0),
    ("Status", "string", 0),
    ("Roles", "string", 0),
    ("Age", "string", 0),
    ("Version", "string", 0),
]
EVENT_COLUMNS = [
    ("Last Seen", "string", 0),
    ("Type", "string", 0),
    ("Reason", "string", 0),
    ("Object", "string", 0),
    ("Message", "string", 0),
]


def table(resource: str, objs: list[Obj], rv: str, now: float) -> Obj:
    columns, cells = PRINTERS[resource]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv},
        "columnDefinitions": [
            {
                "name": n,
                "type": t,
                "format": "name" if n == "Name" else "",
                "description": n,
                "priority": p,
            }
            for n, t, p in columns
        ],
        "rows": [{"cells": cells(o, now), "object": o} for o in objs],
    }


def age(stamp_text: str | None, now: float) -> str:
    if not stamp_text:
        return "<unknown>"
    seconds = max(0, int(now - parse_stamp(stamp_text)))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60}s" if seconds < 600 else f"{seconds // 60}m"
    hours = seconds // 3600
    return f"{hours}h{(seconds % 3600) // 60}m" if hours < 8 else f"{hours}h"


def pod_status_column(pod: Obj) -> str:
    """The STATUS column of kubectl get pods (printPod in pkg/printers/internalversion)."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for c in status.get("initContainerStatuses") or ():
        state = c.get("state") or {}
        if state.get("terminated", {}).get("exitCode", 1) == 0:
            continue
        waiting = state.get("waiting", {}).get("reason")
        reason = f"Init:{waiting}" if waiting and waiting != "PodInitializing" else reason
        if waiting:
            break
    for c in status.get("containerStatuses") or ():
        state = c.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_cells(pod: Obj, now: float) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    total = len(pod["spec"].get("containers") or ())
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(c.get("restartCount", 0) for c in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        pod_status_column(pod),
        str(restarts),
        age(pod["metadata"].get("creationTimestamp"), now),
        status.get("podIP", "<none>"),
        pod["spec"].get("nodeName", "<none>"),
        "<none>",
        "<none>",
    ]


def _node_cells(node: Obj, now: float) -> list[Any]:
    ready = next((c for c in node["status"].get("conditions") or () if c["type"] == "Ready"), None)
    status = "Ready" if ready and ready["status"] == "True" else "NotReady"
    if node["spec"].get("unschedulable"):
        status += ",SchedulingDisabled"
    roles = sorted(
        k.split("/", 1)[1]
        for k in node["metadata"].get("labels") or {}
        if k.startswith("node-role.kubernetes.io/")
    )
    return [
        node["metadata"]["name"],
        status,
        ",".join(roles) or "<none>",
        age(node["metadata"].get("creationTimestamp"), now),
        node["status"].get("nodeInfo", {}).get("kubeletVersion", ""),
    ]


def _event_cells(event: Obj, now: float) -> list[Any]:
    ref = event.get("involvedObject") or event.get("regarding") or {}
    last = event.get("lastTimestamp") or event.get("deprecatedLastTimestamp")
    when = last or (event.get("eventTime") or "")[:19] + "Z"
    return [
        age(when, now),
        event.get("type", ""),
        event.get("reason", ""),
        f"{ref.get('kind', '').lower()}/{ref.get('name', '')}",
        event.get("message", event.get("note", "")),
    ]


DEPLOYMENT_COLUMNS = [
    ("Name", "string", 0),
    ("Ready", "string", 0),
    ("Up-to-date", "integer", 0),
    ("Available", "integer", 0),
    ("Age", "string", 0),
]
REPLICASET_COLUMNS = [
    ("Name", "string", 0),
    ("Desired", "integer", 0),
    ("Current", "integer", 0),
    ("Ready", "integer", 0),
    ("Age", "string", 0),
]
JOB_COLUMNS = [
    ("Name", "string", 0),
    ("Status", "string", 0),
    ("Completions", "string", 0),
    ("Duration", "string", 0),
    ("Age", "string", 0),
]


def _deployment_cells(dep: Obj, now: float) -> list[Any]:
    status = dep.get("status") or {}
    return [
        dep["metadata"]["name"],
        f"{status.get('readyReplicas', 0)}/{dep['spec'].get('replicas', 1)}",
        status.get("updatedReplicas", 0),
        status.get("availableReplicas", 0),
        age(dep["metadata"].get("creationTimestamp"), now),
    ]


def _replicaset_cells(rs: Obj, now: float) -> list[Any]:
    status = rs.get("status") or {}
    return [
        rs["metadata"]["name"],
        rs["spec"].get("replicas", 1),
        status.get("replicas", 0),
        status.get("readyReplicas", 0),
        age(rs["metadata"].get("creationTimestamp"), now),
    ]


def _job_cells(job: Obj, now: float) -> list[Any]:
    status = job.get("status") or {}
    done = {c["type"] for c in status.get("conditions") or () if c.get("status") == "True"}
    state = "Complete" if "Complete" in done else "Failed" if "Failed" in done else "Running"
    start = status.get("startTime")
    end = status.get("completionTime")
    duration = "" if not start else age(start, parse_stamp(end) if end else now)
    return [
        job["metadata"]["name"],
        state,
        f"{status.get('succeeded', 0)}/{job['spec'].get('completions', 1)}",
        duration,
        age(job["metadata"].get("creationTimestamp"), now),
    ]


PRINTERS = {
    "pods": (POD_COLUMNS, _pod_cells),
    "nodes": (NODE_COLUMNS, _node_cells),
    "events": (EVENT_COLUMNS, _event_cells),
    "deployments": (DEPLOYMENT_COLUMNS, _deployment_cells),
    "replicasets": (REPLICASET_COLUMNS, _replicaset_cells),
    "jobs": (JOB_COLUMNS, _job_cells),
}
