"""Node-pressure eviction (pkg/kubelet/eviction): a hard memory threshold crossed, the
eviction manager's housekeeping every 10 s picks a victim and evicts it."""

from __future__ import annotations

from handoff.sim.components.apiserver import set_condition
from handoff.sim.components.kubelet.state import KubeletBase, PodState
from handoff.sim.objects import (
    Obj,
    edit,
    mem_bytes,
    stamp,
)

EVICTION_PERIOD = 10.0  # the eviction manager's housekeeping interval

PRESSURE_TRANSITION = 300.0  # evictionPressureTransitionPeriod

EVICTION_THRESHOLD = "100Mi"  # the default evictionHard memory.available


class Eviction(KubeletBase):
    """The eviction manager of one kubelet."""

    def press_memory(self, evictions: int = 1) -> None:
        """memory.available falls under the hard threshold (100Mi) until ``evictions`` pods
        have been evicted; the eviction manager acts every 10 s (housekeeping), and the node
        reports MemoryPressure until 5 minutes after the last eviction."""
        if not self.memory_pressure:
            self.loop.call_later(self.loop.uniform((0.0, EVICTION_PERIOD)), self._eviction_tick)
        self.memory_pressure = max(self.memory_pressure, evictions)

    def _eviction_tick(self) -> None:
        if self.state == "dead" or not self.memory_pressure:
            return
        if self.state == "running":
            victim = self._eviction_victim()
            if victim is not None:
                self._evict(victim)
                self.memory_pressure -= 1
        if self.memory_pressure:
            self.loop.call_later(EVICTION_PERIOD, self._eviction_tick)
        else:
            self.pressure_until = self.loop.now + PRESSURE_TRANSITION

    def _eviction_victim(self) -> PodState | None:
        """rankMemoryPressure: BestEffort, then Burstable, then Guaranteed; static pods are
        critical and never evicted. Among equals, the largest request goes first."""
        order = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
        running = [
            ps
            for ps in self.pods.values()
            if ps.start_time and not ps.done and not ps.terminating and not ps.static
        ]
        if not running:
            return None
        return min(
            running,
            key=lambda ps: (order.get(ps.pod["status"].get("qosClass", "BestEffort"), 0), -ps.mem),
        )

    def _evict(self, ps: PodState) -> None:
        """evictPod: Warning Evicted, then the pod is killed at once (hard threshold, grace
        0) and left in the API as Failed/Evicted with DisruptionTarget TerminationByKubelet."""
        message = _eviction_message(ps)
        self.recorder.event(ps.pod, "Warning", "Evicted", message)
        ps.terminating = True
        now = self.loop.now
        for c in ps.app:
            running = c["state"].get("running")
            terminated: Obj = {"exitCode": 137, "reason": "Error"}
            if running is not None:
                terminated["startedAt"] = running["startedAt"]
            terminated["finishedAt"] = stamp(now)
            if c.get("containerID"):
                terminated["containerID"] = c["containerID"]
            c["state"] = {"terminated": terminated}
            c["ready"] = False
            c["started"] = False
        ps.ready = False
        ps.phase = "Failed"
        ps.done = True
        self._release(ps)
        pod = self.api.find("pods", ps.pod["metadata"]["namespace"], ps.pod["metadata"]["name"])
        if pod is None or pod["metadata"]["uid"] != ps.uid:
            return
        new = edit(pod, "status")
        status = self.build_status(ps, pod["status"])
        status["message"] = message
        status["reason"] = "Evicted"
        set_condition(status, "DisruptionTarget", "True", now, "TerminationByKubelet", message)
        new["status"] = status
        self._write(new)


def _eviction_message(ps: PodState) -> str:
    """evictionMessage (pkg/kubelet/eviction/helpers.go) for a memory.available eviction."""
    message = "The node was low on resource: memory. "
    message += f"Threshold quantity: {EVICTION_THRESHOLD}, available: 92160Ki. "
    for c in ps.pod["spec"]["containers"]:
        request = ((c.get("resources") or {}).get("requests") or {}).get("memory")
        used = max(mem_bytes(request) * 2, 256 * 2**20) // 2**20
        message += (
            f"Container {c['name']} was using {used}Mi, request is {request or 0}, "
            "has larger consumption of memory. "
        )
    return message
