"""Pod admission (pkg/kubelet/lifecycle/predicate.go, kubelet.go rejectPod).

A kubelet counts only the pods it has admitted; the scheduler counts what it has bound or
assumed. The two views can disagree, which is how a pod the scheduler placed gets rejected
with OutOfcpu ("node state changed since the scheduler's decision")."""

from __future__ import annotations

from handoff.sim.components.kubelet.state import (
    PREDICATE_DESCRIPTION_SINCE,
    QOS_ON_REJECTION_SINCE,
    REJECTED_PREFIX_SINCE,
    TAINT_ADMISSION_SINCE,
    KubeletBase,
    PodState,
)
from handoff.sim.objects import (
    Obj,
    cpu_millis,
    edit,
    host_ports,
    matches_node,
    mem_bytes,
    pod_requests,
    ports_conflict,
    stamp,
    untolerated,
)


class Admission(KubeletBase):
    """The admit handlers: resources, then the predicates, in kubelet order."""

    def _admit(self, ps: PodState) -> None:
        pod = self.api.find("pods", ps.pod["metadata"]["namespace"], ps.pod["metadata"]["name"])
        if pod is None or pod["metadata"]["uid"] != ps.uid:
            self.pods.pop(ps.uid, None)
            return
        ps.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.pods.pop(ps.uid, None)
            self._delete_now(pod)
            return
        rejection = self.admission_failure(pod)
        if rejection is not None:
            self._reject(ps, *rejection)
            return
        ps.cpu, ps.mem = pod_requests(pod)
        self.used_cpu += ps.cpu
        self.used_mem += ps.mem
        self.used_pods += 1
        self._run(ps)

    def admission_failure(self, pod: Obj, static: bool = False) -> tuple[str, str] | None:
        """(reason, message) of the first failing admission check, in kubelet order."""
        node = self.api.find("nodes", "", self.name)
        if node is None:
            return "InvalidNodeInfo", "Kubelet cannot get node info."
        alloc = node["status"].get("allocatable") or {}
        cpu, mem = pod_requests(pod)
        pods_cap, cap_cpu, cap_mem = _capacity(alloc)
        if self.used_pods + 1 > pods_cap:
            return "OutOfpods", _insufficient("pods", 1, self.used_pods, pods_cap)
        if cpu and cpu > cap_cpu - self.used_cpu:
            return "OutOfcpu", _insufficient("cpu", cpu, self.used_cpu, cap_cpu)
        if mem and mem > cap_mem - self.used_mem:
            return "OutOfmemory", _insufficient("memory", mem, self.used_mem, cap_mem)
        if not matches_node(pod["spec"], node):
            return self._predicate(
                "NodeAffinity", "node(s) didn't match Pod's node affinity/selector"
            )
        if pod["spec"].get("nodeName") not in (None, "", self.name):
            return self._predicate("NodeName", "node(s) didn't match the requested node name")
        wanted = host_ports(pod)
        if wanted and ports_conflict(wanted, self._ports_in_use()):
            return self._predicate(
                "NodePorts", "node(s) didn't have free ports for the requested pod ports"
            )
        if not static and self.version >= TAINT_ADMISSION_SINCE:
            taints = node["spec"].get("taints") or []
            if untolerated(taints, pod["spec"].get("tolerations") or [], ("NoExecute",)):
                return self._predicate(
                    "TaintToleration", "node(s) had taints that the pod didn't tolerate"
                )
        return None

    def _predicate(self, name: str, description: str) -> tuple[str, str]:
        """PredicateFailureError: its description joined only from 1.31 (PR #125498)."""
        if self.version >= PREDICATE_DESCRIPTION_SINCE:
            return name, f"Predicate {name} failed: {description}"
        return name, f"Predicate {name} failed"

    def _ports_in_use(self) -> set[tuple[str, str, int]]:
        used: set[tuple[str, str, int]] = set()
        for ps in [*self.pods.values(), *self.static_states.values()]:
            if ps.start_time and not ps.released:
                used.update(host_ports(ps.pod))
        return used

    def _reject(self, ps: PodState, reason: str, message: str) -> None:
        """kubelet.rejectPod: Failed with reason and prefixed message; event without prefix."""
        ps.done = True
        pod = ps.pod
        self.recorder.event(pod, "Warning", reason, message)
        new = edit(pod, "status")
        prefix = "Pod was rejected: " if self.version >= REJECTED_PREFIX_SINCE else "Pod "
        new["status"] = {
            "phase": "Failed",
            "message": prefix + message,
            "reason": reason,
            "startTime": stamp(self.loop.now),
        }
        if self.version >= QOS_ON_REJECTION_SINCE:
            new["status"]["qosClass"] = pod["status"].get("qosClass", "BestEffort")
        self._write(new)


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> str:
    return (
        f"Node didn't have enough resource: {resource}, requested: {requested}, "
        f"used: {used}, capacity: {capacity}"
    )


_capacities: dict[int, tuple[Obj, tuple[int, int, int]]] = {}


def _capacity(alloc: Obj) -> tuple[int, int, int]:
    """(pods, milli-cpu, memory bytes) of an allocatable map, parsed once per map."""
    hit = _capacities.get(id(alloc))
    if hit is not None and hit[0] is alloc:
        return hit[1]
    parsed = (
        int(alloc.get("pods", "110")),
        cpu_millis(alloc.get("cpu", "0")),
        mem_bytes(alloc.get("memory", "0")),
    )
    if len(_capacities) > 65536:
        _capacities.clear()
    _capacities[id(alloc)] = (alloc, parsed)
    return parsed
