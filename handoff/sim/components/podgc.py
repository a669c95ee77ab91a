"""PodGC (pkg/controller/podgc/gc_controller.go): orphaned and excess terminated pods.

Every 20 s. A pod whose nodeName is not in the node cache puts that node in quarantine for
40 s; at the first run after that a live GET decides, and every pod on a missing node is
marked Failed with DisruptionTarget/DeletionByPodGC and deleted with grace 0. No events:
only controller-manager log lines, kept in ``log``.
"""

from __future__ import annotations

from handoff.sim.components.apiserver import ApiError, APIServer, set_condition
from handoff.sim.objects import Obj, edit


class PodGC:
    def __init__(
        self,
        api: APIServer,
        period: float = 20.0,
        quarantine: float = 40.0,
        with_condition: bool = True,
        terminated_threshold: int = 12500,
    ) -> None:
        self.api = api
        self.loop = api.loop
        self.quarantine = quarantine
        self.with_condition = with_condition
        self.terminated_threshold = terminated_threshold
        self.queue: dict[str, float] = {}
        self.log: list[tuple[float, str, str]] = []
        self.loop.every(period, self.gc, first=self.loop.uniform((0.0, period)))

    def gc(self) -> None:
        self.gc_terminated()
        self.gc_orphaned()

    def gc_terminated(self) -> None:
        if self.terminated_threshold <= 0 or self.api.terminal_pods <= self.terminated_threshold:
            return
        objects = self.api.stores["pods"].objects
        terminated = [
            p for p in objects.values() if p["status"].get("phase") in ("Succeeded", "Failed")
        ]
        excess = len(terminated) - self.terminated_threshold
        if excess <= 0:
            return
        terminated.sort(key=lambda p: p["metadata"]["creationTimestamp"])
        for pod in terminated[:excess]:
            self._force_delete(pod, None)

    def gc_orphaned(self) -> None:
        now = self.loop.now
        nodes = self.api.nodes()
        for node_name, pods in self.api.pods_by_node.items():
            if pods and ("", node_name) not in nodes and node_name not in self.queue:
                self.queue[node_name] = now + self.quarantine
        deleted = []
        for node_name, due in list(self.queue.items()):
            if due > now:
                continue
            del self.queue[node_name]
            if self.api.find("nodes", "", node_name) is None:  # the live GET
                deleted.append(node_name)
        for node_name in deleted:
            for pod in self.api.pods_on(node_name):
                self._force_delete(pod, _CONDITION if self.with_condition else None)

    def _force_delete(self, pod: Obj, condition: tuple[str, str] | None) -> None:
        meta = pod["metadata"]
        name = f"{meta['namespace']}/{meta['name']}"
        self.log.append((self.loop.now, "PodGC is force deleting Pod", name))
        try:
            # markFailedAndDeletePodWithCondition (1.26+, PodDisruptionConditions); before,
            # and for pods already terminal (PR #115056), only the Delete(grace 0).
            if condition is not None and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                new = edit(pod, "status")
                new["status"]["phase"] = "Failed"
                set_condition(
                    new["status"],
                    "DisruptionTarget",
                    "True",
                    self.loop.now,
                    condition[0],
                    condition[1],
                )
                self.api.update("pods", new)
            self.api.delete("pods", meta["namespace"], meta["name"], grace=0)
        except ApiError:
            return
        self.log.append((self.loop.now, "Forced deletion of orphaned Pod succeeded", name))


_CONDITION = ("DeletionByPodGC", "PodGC: node no longer exists")
