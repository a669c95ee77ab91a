"""A recorded incident as a simulator scenario: the trace's nodes, its pods created at the
same offsets with the same specs, and the node events that shaped it as faults — a YAML
user scenario (docs/simulator.md) that ``simulate --file`` runs again, with any seed.

What it takes from the trace (docs/interop.md, "A recorded incident as a scenario"):

- **nodes**: every Node seen, with its allocatable cpu, memory and pods, labels and taints
  as first seen. Without any Node object, every node a pod ran on, with defaults.
- **pods**: each pod at its creation offset (pods that predate the trace at 0): name,
  namespace, labels, containers (name, image, resources, ports), init containers,
  nodeSelector, affinity, tolerations, restartPolicy, grace period; ``spec.nodeName`` only
  for pods created with it (manual binding). Controller-owned pods become bare pods (the
  incident is the pods, not the controllers' later decisions); mirror pods are left to the
  kubelets: when the trace has them on a node named ``control-plane``, the scenario asks
  for the simulator's kubeadm control plane instead of that node.
- **deletions**: pods judged ``deleted`` (by a person or a controller; mirror pods too, which
  their kubelet then recreates) are deleted at the time their deletion was seen.
- **faults**: a Node deleted → ``delete``; Ready turning Unknown ("Kubelet stopped posting
  node status") → ``stop`` one grace period (40 s) before; a node whose kubelet never
  answered pods bound to it while its heartbeats went on → ``hang`` just before the first
  such binding; NoExecute taints added later → ``taint``; cordons → ``cordon``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson

from handoff.core.report import build_report
from handoff.core.timeline import Timeline
from handoff.core.trace import WatchEvent, parse_time

NODE_MONITOR_GRACE = 40.0
CONTROL_PLANE = "control-plane"
POD_SPEC_KEYS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "priority",
    "priorityClassName",
    "hostNetwork",
)
CONTAINER_KEYS = ("name", "image", "resources", "ports")
SYSTEM_TAINT_PREFIX = "node.kubernetes.io/"


def scenario_from_events(events: Iterable[WatchEvent], name: str = "incident") -> dict[str, Any]:
    """The scenario as a dict, ready for ``yaml.safe_dump``."""
    timeline = Timeline()
    t0: float | None = None
    last = 0.0
    nodes: dict[str, dict[str, Any]] = {}
    pods: dict[str, dict[str, Any]] = {}
    faults: list[dict[str, Any]] = []
    node_state: dict[str, dict[str, Any]] = {}
    for event in events:
        timeline.apply(event)
        at = event.time()
        t0 = at if t0 is None else min(t0, at)
        last = max(last, at)
        obj = _raw_object(event)
        if obj is None:
            continue
        kind = obj.get("kind")
        if kind == "Node":
            _node(obj, event.type, at, nodes, node_state, faults)
        elif kind == "Pod" and event.type != "DELETED":
            uid = (obj.get("metadata") or {}).get("uid") or _key(obj)
            pods.setdefault(uid, obj)
    if t0 is None:
        raise ValueError("the trace holds no watch events")
    report = build_report(timeline)
    views = {view["uid"] or f"{view['namespace']}/{view['name']}": view for view in report["pods"]}
    workloads: list[dict[str, Any]] = []
    # The simulator's kubeadm control plane (static pods on node "control-plane") stands in
    # for a trace's one, whose mirror pods the kubelet creates, not a workload.
    control_plane = any(
        _is_mirror(obj) and (obj.get("spec") or {}).get("nodeName") == CONTROL_PLANE
        for obj in pods.values()
    )
    if control_plane:
        nodes.pop(CONTROL_PLANE, None)
    for uid, obj in pods.items():
        view = views.get(uid)
        if view is None:
            continue
        created = _time(view["milestones"]["created"]) or t0
        if not _is_mirror(obj):
            workloads.append({"at": _offset(created, t0), "pod": _manifest(obj, view)})
        if view["verdict"] == "deleted" and view["milestones"]["deleted"]:
            target = {"namespace": view["namespace"], "name": view["name"], "grace": 0}
            workloads.append(
                {"at": _offset(_time(view["milestones"]["deleted"]), t0), "delete": target}
            )
        if view["reason"] == "kubelet-silent" and view["node"] in nodes:
            bound = _time(view["milestones"]["bound"]) or created
            faults.append({"at": _offset(bound, t0, -1.0), "node": view["node"], "action": "hang"})
    if not nodes:
        for view in report["pods"]:
            if view["node"] and view["milestones"]["kubelet_ack"]:
                nodes.setdefault(view["node"], {"name": view["node"]})
    for fault in faults:
        if isinstance(fault.get("at_abs"), float):
            fault["at"] = _offset(fault.pop("at_abs"), t0)
    faults.sort(key=lambda item: item["at"])
    faults = _unique(faults)
    workloads.sort(key=lambda item: item["at"])
    return {
        "name": name,
        "description": f"rebuilt from a trace of {len(pods)} pods and {len(nodes)} nodes",
        "duration": round(last - t0 + 60.0, 1),
        "cluster": {"control_plane": control_plane, "node_monitor_grace": NODE_MONITOR_GRACE},
        "nodes": list(nodes.values()),
        "workloads": workloads,
        "faults": faults,
    }


def _raw_object(event: WatchEvent) -> dict[str, Any] | None:
    if isinstance(event.object, dict):
        return event.object
    if event.raw is None:
        return None
    record = orjson.loads(event.raw)
    obj = record.get("object")
    return obj if isinstance(obj, dict) else None


def _node(
    obj: dict[str, Any],
    type_: str,
    at: float,
    nodes: dict[str, dict[str, Any]],
    state: dict[str, dict[str, Any]],
    faults: list[dict[str, Any]],
) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        return
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if type_ == "DELETED":
        faults.append({"at_abs": at, "node": name, "action": "delete"})
        return
    seen = state.setdefault(name, {"ready": None, "taints": set(), "cordoned": False})
    if name not in nodes:
        nodes[name] = _node_entry(name, meta, spec, status)
        seen["taints"] = {_taint_key(t) for t in spec.get("taints") or []}
        seen["cordoned"] = bool(spec.get("unschedulable"))
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if ready is not None:
        stopped = ready.get("status") == "Unknown"
        if stopped and seen["ready"] != "Unknown":
            when = _time(ready.get("lastTransitionTime")) or at
            faults.append({"at_abs": when - NODE_MONITOR_GRACE, "node": name, "action": "stop"})
        seen["ready"] = ready.get("status")
    for taint in spec.get("taints") or []:
        key = _taint_key(taint)
        if key in seen["taints"] or str(taint.get("key", "")).startswith(SYSTEM_TAINT_PREFIX):
            continue
        seen["taints"].add(key)
        clean = {k: taint[k] for k in ("key", "value", "effect") if taint.get(k) is not None}
        faults.append({"at_abs": at, "node": name, "action": "taint", "taint": clean})
    if spec.get("unschedulable") and not seen["cordoned"]:
        faults.append({"at_abs": at, "node": name, "action": "cordon"})
    seen["cordoned"] = bool(spec.get("unschedulable"))


def _node_entry(
    name: str, meta: dict[str, Any], spec: dict[str, Any], status: dict[str, Any]
) -> dict[str, Any]:
    allocatable = status.get("allocatable") or status.get("capacity") or {}
    entry: dict[str, Any] = {"name": name}
    if allocatable.get("cpu"):
        entry["cpu"] = str(allocatable["cpu"])
    if allocatable.get("memory"):
        entry["memory"] = str(allocatable["memory"])
    if str(allocatable.get("pods", "")).isdigit():
        entry["pods"] = int(allocatable["pods"])
    labels = {
        k: v
        for k, v in (meta.get("labels") or {}).items()
        if k != "kubernetes.io/hostname" and isinstance(v, str)
    }
    if labels:
        entry["labels"] = labels
    taints = [
        {k: t[k] for k in ("key", "value", "effect") if t.get(k) is not None}
        for t in spec.get("taints") or []
        if not str(t.get("key", "")).startswith(SYSTEM_TAINT_PREFIX)
    ]
    if taints:
        entry["taints"] = taints
    return entry


def _manifest(obj: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    manifest_meta: dict[str, Any] = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace") or "default",
    }
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if isinstance(v, str)}
    if labels:
        manifest_meta["labels"] = labels
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("sim.handoff/")
    }
    if annotations:
        manifest_meta["annotations"] = annotations
    manifest_spec: dict[str, Any] = {
        "containers": [_container(c) for c in spec.get("containers") or [] if isinstance(c, dict)]
    }
    init = [_container(c) for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    if init:
        manifest_spec["initContainers"] = init
    for key in POD_SPEC_KEYS:
        if spec.get(key) is not None:
            manifest_spec[key] = spec[key]
    manifest_spec["tolerations"] = [
        t
        for t in manifest_spec.get("tolerations") or []
        if not str(t.get("key", "")).startswith(SYSTEM_TAINT_PREFIX) or "tolerationSeconds" not in t
    ] or None
    if manifest_spec["tolerations"] is None:
        del manifest_spec["tolerations"]
    if view.get("binding") == "manual" and view.get("node"):
        manifest_spec["nodeName"] = view["node"]
    return {"metadata": manifest_meta, "spec": manifest_spec}


def _container(container: dict[str, Any]) -> dict[str, Any]:
    return {
        key: container[key] for key in CONTAINER_KEYS if container.get(key) not in (None, {}, [])
    }


def _is_mirror(obj: dict[str, Any]) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return "kubernetes.io/config.mirror" in annotations


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def _taint_key(taint: dict[str, Any]) -> str:
    return f"{taint.get('key')}={taint.get('value')}:{taint.get('effect')}"


def _time(text: str | None) -> float | None:
    return None if not text else parse_time(text)


def _offset(at: float | None, t0: float, shift: float = 0.0) -> float:
    return round(max(0.0, (at if at is not None else t0) - t0 + shift), 3)


def _unique(faults: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen = set()
    out = []
    for fault in faults:
        key = (fault["node"], fault["action"], orjson.dumps(fault.get("taint")))
        if fault["action"] == "hang" and key in seen:
            continue
        seen.add(key)
        out.append(fault)
    return out
