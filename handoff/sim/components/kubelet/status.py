"""The status manager (pkg/kubelet/status, kubelet_pods.go generateAPIPodStatus): pod
status writes batched, conditions in kubelet order."""

from __future__ import annotations

from typing import Any

from handoff.sim.components.apiserver import ApiError
from handoff.sim.components.kubelet.state import KubeletBase, PodState
from handoff.sim.objects import (
    Obj,
    stamp,
)

KUBELET_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)

_CONDITION_TRUE: tuple[str, str | None, str | None] = ("True", None, None)

_SANDBOX_TRUE = _CONDITION_TRUE

_SANDBOX_FALSE: tuple[str, str | None, str | None] = ("False", None, None)


class StatusManager(KubeletBase):
    """Writes what the pod workers know to the API, one batched write at a time."""

    def _status_soon(self, ps: PodState, delay: tuple[float, float] | None = None) -> None:
        """The status manager batches: one write soon, carrying the state at write time.

        Container state changes reach it through PLEG's relist (``t.pleg``), the rest after
        ``t.status``.
        """
        if ps.status_pending:
            return
        ps.status_pending = True
        self._later(delay or self.t.status, self._write_status, ps)

    def _write_status(self, ps: PodState) -> None:
        ps.status_pending = False
        if ps.static:
            self._write_mirror_status(ps)
            return
        meta = ps.pod["metadata"]
        pod = self.api.find("pods", meta["namespace"], meta["name"])
        if pod is None or pod["metadata"]["uid"] != ps.uid:
            return
        status = self.build_status(ps, pod["status"])
        if status != pod["status"]:
            self._write({**pod, "status": status})

    def _write(self, new: Obj) -> None:
        try:  # noqa: SIM105 (contextlib.suppress costs three calls; per status write)
            self.api.update("pods", new)
        except ApiError:
            pass

    def build_status(self, ps: PodState, old: Obj) -> Obj:
        """generateAPIPodStatus: conditions in kubelet order, container statuses.

        Runs for every status write: no comprehensions (each is a call) and the
        ``containers with … status`` messages are only formatted when they are needed.
        """
        now = self.loop.now
        done = ps.phase in ("Succeeded", "Failed")
        initialized: tuple[str, str | None, str | None] = _CONDITION_TRUE
        if ps.init:
            init_pending = [c["name"] for c in ps.init if "terminated" not in c["state"]]
            if init_pending:
                initialized = (
                    "False",
                    "ContainersNotInitialized",
                    f"containers with incomplete status: [{' '.join(init_pending)}]",
                )
        if ps.ready:
            ready: tuple[str, str | None, str | None] = _CONDITION_TRUE
        elif done:
            ready = ("False", "PodCompleted", None)
        else:
            unready = [c["name"] for c in ps.app if not c["ready"]] or [c["name"] for c in ps.app]
            ready = (
                "False",
                "ContainersNotReady",
                f"containers with unready status: [{' '.join(unready)}]",
            )
        # In KUBELET_CONDITIONS order: PodReadyToStartContainers, Initialized, Ready,
        # ContainersReady, PodScheduled.
        values = (
            _SANDBOX_TRUE if ps.sandbox and not done else _SANDBOX_FALSE,
            initialized,
            ready,
            ready,
            _CONDITION_TRUE,
        )
        conditions = self._conditions(values, old.get("conditions") or (), now)
        status: Obj = {
            "phase": ps.phase,
            "conditions": conditions,
            "hostIP": self.ip,
            "hostIPs": self.host_ips,
        }
        if ps.pod_ip:
            status["podIP"] = ps.pod_ip
            status["podIPs"] = [{"ip": ps.pod_ip}]
        status["startTime"] = stamp(ps.start_time)
        if ps.init:
            status["initContainerStatuses"] = list(map(dict, ps.init))
        status["containerStatuses"] = list(map(dict, ps.app))
        status["qosClass"] = old.get("qosClass", "BestEffort")
        return status

    def _conditions(
        self, values: tuple[tuple[str, str | None, str | None], ...], old: Any, now: float
    ) -> list[Obj]:
        """The kubelet's conditions in its order, an unchanged one shared as it was stored;
        conditions others own (DisruptionTarget, readiness gates) kept after them."""
        previous: dict[str, Obj] = {}
        for c in old:
            previous[c["type"]] = c
        conditions = []
        found = 0
        types = self.condition_types
        if len(types) < len(values):
            values = values[len(values) - len(types) :]  # before 1.29: no sandbox condition
        for type_, (value, reason, message) in zip(types, values, strict=True):
            prev = previous.get(type_)
            if prev is not None:
                found += 1
                if (
                    prev["status"] == value
                    and prev.get("reason") == reason
                    and prev.get("message") == message
                    and len(prev) == 4 + (reason is not None) + (message is not None)
                    and "lastProbeTime" in prev
                    and prev["lastProbeTime"] is None
                ):
                    conditions.append(prev)  # unchanged: share it (stored objects are immutable)
                    continue
            cond: Obj = {"type": type_, "status": value, "lastProbeTime": None}
            if prev is not None and prev["status"] == value:
                cond["lastTransitionTime"] = prev.get("lastTransitionTime")
            else:
                cond["lastTransitionTime"] = stamp(now)
            if reason:
                cond["reason"] = reason
            if message:
                cond["message"] = message
            conditions.append(cond)
        if len(previous) > found:
            for type_, prev in previous.items():
                if type_ not in KUBELET_CONDITIONS:
                    conditions.append(prev)
        return conditions
