"""Node status and heartbeats (pkg/kubelet/kubelet_node_status.go, pkg/kubelet/nodestatus,
pkg/kubelet/nodelease): registration, the Lease renewed every 10 s, node conditions posted
when they change or every 5 minutes, and the kubelet's own NodeReady/NodeNotReady events."""

from __future__ import annotations

from handoff.sim.components.kubelet.state import KubeletBase
from handoff.sim.objects import (
    Obj,
    edit,
    stamp,
)

NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)

NODE_STATUS_EVENTS = {
    "MemoryPressure": ("NodeHasSufficientMemory", "NodeHasInsufficientMemory"),
    "DiskPressure": ("NodeHasNoDiskPressure", "NodeHasDiskPressure"),
    "PIDPressure": ("NodeHasSufficientPID", "NodeHasInsufficientPID"),
    "Ready": ("NodeNotReady", "NodeReady"),
}


class NodeStatus(KubeletBase):
    """The node status manager and the lease controller of one kubelet."""

    def register(self) -> None:
        """Create the Node (as kubelet registration does), start heartbeats and static pods."""
        now = self.loop.now
        node = edit(self.node_template, "status")
        node["status"]["conditions"] = self._node_conditions(now, None)
        self.api.create("nodes", node)
        self.last_report = now
        self.api.renew_lease(self.name)
        self.loop.every(
            self.t.node_status_frequency,
            self._node_status_tick,
            first=self.loop.uniform((0.5, self.t.node_status_frequency)),
        )
        self.loop.every(self.t.lease_renew, self._renew_lease)
        for name in list(self.static):
            self._start_static(name)

    def _alive(self) -> bool:
        return self.state in ("running", "hung")

    def _renew_lease(self) -> bool:
        if self.state == "dead":
            return False
        if self._alive():
            self.api.renew_lease(self.name)
        return True

    def _node_conditions(self, now: float, old: list[Obj] | None) -> list[Obj]:
        """The kubelet's node condition setters (pkg/kubelet/nodestatus/setters.go)."""
        memory = (
            (
                "MemoryPressure",
                "True",
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            )
            if self._under_pressure()
            else (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            )
        )
        ready = (
            ("Ready", "False", "KubeletNotReady", self.not_ready)
            if self.not_ready
            else ("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        )
        spec = [
            memory,
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            ready,
        ]
        previous = {c["type"]: c for c in old or ()}
        out = []
        for type_, status, reason, message in spec:
            prev = previous.get(type_)
            transition = stamp(now)
            if prev is not None and prev["status"] == status:
                transition = prev["lastTransitionTime"]
            elif prev is not None and type_ in NODE_STATUS_EVENTS:
                # recordNodeStatusEvent: the kubelet's own event on its Node.
                event = NODE_STATUS_EVENTS[type_][status == "True"]
                self.node_event(event, f"Node {self.name} status is now: {event}")
            out.append(
                {
                    "type": type_,
                    "status": status,
                    "lastHeartbeatTime": stamp(now),
                    "lastTransitionTime": transition,
                    "reason": reason,
                    "message": message,
                }
            )
        return out

    def node_event(self, reason: str, message: str) -> None:
        ref = {"kind": "Node", "name": self.name, "uid": self.name, "apiVersion": "v1"}
        self.recorder.event_ref(ref, "Normal", reason, message)

    def _wanted(self, type_: str) -> str:
        if type_ == "Ready":
            return "False" if self.not_ready else "True"
        if type_ == "MemoryPressure" and self._under_pressure():
            return "True"
        return "False"

    def _under_pressure(self) -> bool:
        return bool(self.memory_pressure) or self.loop.now < self.pressure_until

    def _node_status_tick(self) -> bool:
        """Every 10 s: post status if it changed, or every 5 minutes regardless."""
        if self.state == "dead":
            return False
        if not self._alive():
            return True
        node = self.api.find("nodes", "", self.name)
        if node is None:
            return True
        now = self.loop.now
        old = node["status"].get("conditions") or []
        # Most ticks see the Node it last found in order: skip comparing it again.
        wanted = (self.not_ready, self._under_pressure())
        if node is self._in_order[0] and wanted == self._in_order[1]:
            changed = False
        else:
            changed = any(c["status"] != self._wanted(c["type"]) for c in old)
            if not changed:
                self._in_order = (node, wanted)
        if changed or now - self.last_report >= self.t.node_status_report:
            new = edit(node, "status")
            new["status"]["conditions"] = self._node_conditions(now, old)
            self.api.update("nodes", new)
            self.last_report = now
        return True

    def hang(self) -> None:
        self.state = "hung"

    def report_not_ready(self, message: str | None = None) -> None:
        """The kubelet runs but reports Ready=False (posted at its next status tick)."""
        self.not_ready = message or NOT_READY_MESSAGE

    def report_ready(self) -> None:
        self.not_ready = None
