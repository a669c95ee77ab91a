"""Node lifecycle controller and taint-eviction controller (pkg/controller/nodelifecycle,
pkg/controller/tainteviction).

Every 5 s the node lifecycle controller compares each node's last heartbeat (node status or
Lease) with the grace period; past it, Ready and the pressure conditions become Unknown,
the node gets unreachable taints (NoSchedule and NoExecute), a NodeNotReady event, and pods
whose Ready condition flips to False get their own NodeNotReady event. The taint-eviction
controller then deletes pods once their tolerationSeconds run out, or at once when they do
not tolerate a NoExecute taint at all.
"""

from __future__ import annotations

from handoff.sim.components.apiserver import ApiError, APIServer, set_condition
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import (
    NOT_READY_TAINT,
    UNREACHABLE_TAINT,
    Obj,
    edit,
    parse_stamp,
    stamp,
    tolerates,
)

UNKNOWN_MESSAGE = "Kubelet stopped posting node status."
MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")


class NodeLifecycle:
    def __init__(
        self,
        api: APIServer,
        monitor_period: float = 5.0,
        grace: float = 40.0,
        taint_delay: tuple[float, float] = (0.05, 0.5),
        node_events: bool = False,
        noexecute_next_pass: bool = False,
    ) -> None:
        self.api = api
        self.loop = api.loop
        self.grace = grace
        self.taint_delay = taint_delay
        self.node_events = node_events
        self.noexecute_next_pass = noexecute_next_pass
        self.recorder = CoreRecorder(api, "node-controller")
        self.seen: dict[str, tuple[str | None, float | None, float]] = {}
        self.quiet: dict[str, tuple[Obj | None, float | None, float]] = {}
        self.observed: dict[str, str] = {}  # the Ready status seen at the last pass
        self.loop.every(monitor_period, self.monitor)

    def monitor(self) -> None:
        now = self.loop.now
        leases = self.api.leases
        quiet = self.quiet
        for (_, name), node in list(self.api.nodes().items()):
            # Fast path: nothing changed since the last pass and the node is well in time.
            last = quiet.get(name)
            if (
                last is not None
                and last[0] is node
                and last[1] == leases.get(name)
                and now - last[2] <= self.grace
            ):
                continue
            ready = _condition(node, "Ready")
            heartbeat = ready.get("lastHeartbeatTime") if ready else None
            lease = self.api.leases.get(name)
            prev = self.seen.get(name)
            if prev is None and self.node_events:
                self._node_event(name, "RegisteredNode", "Registered Node {} in Controller")
            if prev is None or prev[0] != heartbeat or prev[1] != lease:
                probe = now if prev is not None else _created(node, now)
                self.seen[name] = (heartbeat, lease, probe)
            probe = self.seen[name][2]
            status = ready["status"] if ready else "Unknown"
            if now - probe > self.grace and status != "Unknown":
                self._mark_unknown(node)
            else:
                if status == "False" and self.observed.get(name) == "True":
                    # The kubelet itself reports NotReady: same event and pod marking as
                    # for a silent node, and the not-ready taints.
                    self._record_not_ready(name)
                self._reconcile_taints(node, status)
                self._reconcile_pressure_taints(node)
                if status == "True":
                    quiet[name] = (self.api.find("nodes", "", name), lease, probe)
            self.observed[name] = status
        if len(self.seen) > len(self.api.nodes()):
            for name in [n for n in self.seen if ("", n) not in self.api.nodes()]:
                del self.seen[name]
                self.quiet.pop(name, None)
                if self.node_events:
                    self._node_event(name, "RemovingNode", "Removing Node {} from Controller")

    def _node_event(self, name: str, reason: str, what: str) -> None:
        """node_lifecycle_controller.go recordNodeEvent (every release): Normal, on the
        Node, "Node X event: " + what happened."""
        ref = {"kind": "Node", "name": name, "uid": name, "apiVersion": "v1"}
        self.recorder.event_ref(ref, "Normal", reason, f"Node {name} event: {what.format(name)}")

    def _mark_unknown(self, node: Obj) -> None:
        now = self.loop.now
        new = edit(node, "status")
        conditions = []
        was_ready = False
        for cond in node["status"].get("conditions") or ():
            if cond["type"] in CONDITIONS:
                if cond["type"] == "Ready":
                    was_ready = cond["status"] == "True"
                cond = {
                    "type": cond["type"],
                    "status": "Unknown",
                    "lastHeartbeatTime": cond.get("lastHeartbeatTime"),
                    "lastTransitionTime": stamp(now),
                    "reason": "NodeStatusUnknown",
                    "message": UNKNOWN_MESSAGE,
                }
            conditions.append(cond)
        new["status"]["conditions"] = conditions
        self.api.update("nodes", new)
        name = node["metadata"]["name"]
        if was_ready:
            self._record_not_ready(name)
        # v1.20.2: NoSchedule now, NoExecute on the next monitor pass (noexecute_next_pass).
        self.loop.call_later(
            self.loop.uniform(self.taint_delay),
            self._reconcile_taints_by_name,
            name,
            "Unknown",
            not self.noexecute_next_pass,
        )

    def _record_not_ready(self, name: str) -> None:
        ref = {"kind": "Node", "name": name, "uid": name, "apiVersion": "v1"}
        self.recorder.event_ref(
            ref, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady"
        )
        self._mark_pods_not_ready(name)

    def _reconcile_pressure_taints(self, node: Obj) -> None:
        """taint-node-by-condition: node.kubernetes.io/memory-pressure:NoSchedule while
        MemoryPressure is True."""
        cond = _condition(node, "MemoryPressure")
        want = cond is not None and cond["status"] == "True"
        taints = list(node["spec"].get("taints") or ())
        have = any(t["key"] == MEMORY_PRESSURE_TAINT for t in taints)
        if want == have:
            return
        if want:
            taints.append({"key": MEMORY_PRESSURE_TAINT, "effect": "NoSchedule"})
        else:
            taints = [t for t in taints if t["key"] != MEMORY_PRESSURE_TAINT]
        new = edit(node, "spec")
        if taints:
            new["spec"]["taints"] = taints
        else:
            new["spec"].pop("taints", None)
        self.api.update("nodes", new)

    def _mark_pods_not_ready(self, node_name: str) -> None:
        """MarkPodsNotReady: only pods that have a Ready condition, and only if it changes."""
        now = self.loop.now
        for pod in self.api.pods_on(node_name):
            ready = _condition(pod, "Ready")
            if ready is None or ready["status"] == "False":
                continue
            new = edit(pod, "status")
            if set_condition(new["status"], "Ready", "False", now):
                try:
                    self.api.update("pods", new)
                except ApiError:
                    continue
                self.recorder.event(pod, "Warning", "NodeNotReady", "Node is not ready")

    def _reconcile_taints_by_name(self, name: str, status: str, no_execute: bool = True) -> None:
        node = self.api.find("nodes", "", name)
        if node is not None:
            self._reconcile_taints(node, status, no_execute)

    def _reconcile_taints(self, node: Obj, status: str, no_execute: bool = True) -> None:
        """Unknown -> unreachable, False -> not-ready, True -> neither (NoSchedule + NoExecute)."""
        want_key = {"Unknown": UNREACHABLE_TAINT, "False": NOT_READY_TAINT}.get(status)
        taints = list(node["spec"].get("taints") or ())
        managed = (UNREACHABLE_TAINT, NOT_READY_TAINT)
        kept = [t for t in taints if t["key"] not in managed or t["key"] == want_key]
        have = {(t["key"], t["effect"]) for t in kept}
        now = self.loop.now
        if want_key:
            if (want_key, "NoSchedule") not in have:
                kept.append({"key": want_key, "effect": "NoSchedule"})
            if no_execute and (want_key, "NoExecute") not in have:
                kept.append({"key": want_key, "effect": "NoExecute", "timeAdded": stamp(now)})
        if kept == taints:
            return
        new = edit(node, "spec")
        if kept:
            new["spec"]["taints"] = kept
        else:
            new["spec"].pop("taints", None)
        self.api.update("nodes", new)


class TaintEviction:
    """taint-eviction-controller: evicts pods from nodes with NoExecute taints they do not
    tolerate, after the smallest tolerationSeconds of the tolerations that matched."""

    def __init__(
        self,
        api: APIServer,
        component: str = "taint-eviction-controller",
        disruption_condition: bool = True,
    ) -> None:
        self.api = api
        self.disruption_condition = disruption_condition
        self.loop = api.loop
        self.recorder = CoreRecorder(api, component)
        self.scheduled: dict[str, tuple[float, float, str]] = {}  # uid -> (start, due, node)
        self.node_taints: dict[str, tuple[tuple[str, str, str], ...]] = {}
        api.subscribe("nodes", self._on_node)
        api.subscribe("pods", self._on_pod)

    def _on_node(self, type_: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        taints = tuple(
            (t["key"], t.get("value", ""), t["effect"])
            for t in node["spec"].get("taints") or ()
            if t.get("effect") == "NoExecute"
        )
        if type_ == "DELETED":
            self.node_taints.pop(name, None)
            return
        if self.node_taints.get(name, ()) == taints:
            return
        self.node_taints[name] = taints
        self.loop.call_later(0.01, self._process_node, name)

    def _on_pod(self, type_: str, pod: Obj) -> None:
        node_name = pod["spec"].get("nodeName")
        if type_ == "DELETED" or not node_name:
            self.scheduled.pop(pod["metadata"]["uid"], None)
            return
        if self.node_taints.get(node_name) and pod["metadata"]["uid"] not in self.scheduled:
            self.loop.call_later(
                0.01,
                self._process_pod,
                pod["metadata"]["uid"],
                pod["metadata"]["namespace"],
                pod["metadata"]["name"],
            )

    def _process_node(self, name: str) -> None:
        for pod in self.api.pods_on(name):
            meta = pod["metadata"]
            self._process_pod(meta["uid"], meta["namespace"], meta["name"])

    def _process_pod(self, uid: str, namespace: str, name: str) -> None:
        pod = self.api.find("pods", namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        node_name = pod["spec"].get("nodeName")
        node = self.api.find("nodes", "", node_name) if node_name else None
        taints = [
            t
            for t in (node["spec"].get("taints") or () if node else ())
            if t.get("effect") == "NoExecute"
        ]
        now = self.loop.now
        if not taints:
            if self.scheduled.pop(uid, None) is not None:
                self._event(pod, f"Cancelling deletion of Pod {namespace}/{name}")
            return
        tolerations = pod["spec"].get("tolerations") or []
        used = []
        for taint in taints:
            match = [t for t in tolerations if tolerates(t, taint)]
            if not match:
                self.scheduled.pop(uid, None)
                self._evict(uid, namespace, name)
                return
            used.extend(match)
        seconds = [t["tolerationSeconds"] for t in used if t.get("tolerationSeconds") is not None]
        if not seconds:
            return
        wait = max(0.0, float(min(seconds)))
        start = now
        current = self.scheduled.get(uid)
        if current is not None:
            start = current[0]
            if start + wait >= current[1] - 1e-9:
                return
        due = start + wait
        self.scheduled[uid] = (start, due, node_name or "")
        self.loop.call_at(due, self._due, uid, namespace, name, due)

    def _due(self, uid: str, namespace: str, name: str, due: float) -> None:
        current = self.scheduled.get(uid)
        if current is None or abs(current[1] - due) > 1e-9:
            return
        del self.scheduled[uid]
        self._evict(uid, namespace, name)

    def _event(self, pod: Obj, message: str) -> None:
        meta = pod["metadata"]
        ref = {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "apiVersion": "v1",
        }
        self.recorder.event_ref(ref, "Normal", "TaintManagerEviction", message)

    def _evict(self, uid: str, namespace: str, name: str) -> None:
        pod = self.api.find("pods", namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        if pod["metadata"].get("deletionTimestamp"):
            return
        self._event(pod, f"Marking for deletion Pod {namespace}/{name}")
        new = edit(pod, "status")
        try:
            if self.disruption_condition and set_condition(
                new["status"],
                "DisruptionTarget",
                "True",
                self.loop.now,
                "DeletionByTaintManager",
                "Taint manager: deleting due to NoExecute taint",
            ):
                self.api.update("pods", new)
            self.api.delete("pods", namespace, name)
        except ApiError:
            return


def _condition(obj: Obj, type_: str) -> Obj | None:
    for cond in obj["status"].get("conditions") or ():
        if cond["type"] == type_:
            return cond
    return None


def _created(node: Obj, now: float) -> float:
    text = node["metadata"].get("creationTimestamp")
    return parse_stamp(text) if text else now
