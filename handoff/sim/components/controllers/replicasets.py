"""The replicaset-controller (pkg/controller/replicaset): keeps a ReplicaSet's active pods at
its replicas. Like the real one, failed pods do not count as replicas: a template with a
nodeName that the kubelet rejects makes the ReplicaSet create replacement after replacement."""

from __future__ import annotations

import contextlib
import copy

from handoff.sim.components.apiserver import ApiError, APIServer
from handoff.sim.components.controllers.owners import (
    Owner,
    delete_object,
    is_active,
    is_owned,
    is_ready,
    write_spec,
    write_status,
)
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import Obj, new_uid


class ReplicaSets:
    """The replicaset-controller for every ReplicaSet in the cluster."""

    def __init__(self, api: APIServer, delay: tuple[float, float] = (0.005, 0.05)) -> None:
        self.api = api
        self.loop = api.loop
        self.delay = delay
        self.recorder = CoreRecorder(api, "replicaset-controller")
        self.sets: dict[str, Owner] = {}
        self._pending: set[str] = set()
        self.failures: dict[str, int] = {}  # uid -> creations failed in a row (rate limit)
        api.subscribe("pods", self._on_pod, predicate=is_owned)

    def create(
        self,
        namespace: str,
        name: str,
        template: Obj,
        replicas: int,
        owner: Owner | None = None,
        annotations: Obj | None = None,
    ) -> Owner:
        rs = Owner(
            "ReplicaSet", "apps/v1", namespace, name, new_uid(self.loop.rng), template, replicas
        )
        labels = dict((template.get("metadata") or {}).get("labels") or {})
        meta: Obj = {"name": name, "namespace": namespace, "generation": 1, "labels": labels}
        if annotations:
            meta["annotations"] = annotations
        if owner is not None:
            meta["ownerReferences"] = [owner.owner_ref()]
        obj = {
            "kind": "ReplicaSet",
            "apiVersion": "apps/v1",
            "metadata": meta,
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": labels},
                "template": template,
            },
            "status": {"replicas": 0},
        }
        rs.obj = self.api.create("replicasets", obj, uid=rs.uid)
        self.sets[rs.uid] = rs
        self._sync_soon(rs.uid)
        return rs

    def scale(self, rs: Owner, replicas: int) -> None:
        rs.replicas = replicas
        write_spec(self.api, rs, dict(rs.as_obj()["spec"], replicas=replicas))
        self._sync_soon(rs.uid)

    def _write_status(self, rs: Owner) -> None:
        active = [p for p in rs.pods.values() if is_active(p)]
        ready = sum(1 for p in active if is_ready(p))
        status: Obj = {"replicas": len(active), "fullyLabeledReplicas": len(active)}
        if ready:
            status["readyReplicas"] = ready
            status["availableReplicas"] = ready
        status["observedGeneration"] = rs.as_obj()["metadata"].get("generation", 1)
        write_status(self.api, rs, status)

    def _on_pod(self, type_: str, pod: Obj) -> None:
        owner = pod["metadata"]["ownerReferences"][0]
        rs = self.sets.get(owner["uid"])
        if rs is None:
            return
        uid = pod["metadata"]["uid"]
        if type_ == "DELETED":
            rs.pods.pop(uid, None)
        else:
            rs.pods[uid] = pod
        self._sync_soon(rs.uid)

    def _sync_soon(self, uid: str) -> None:
        if uid not in self._pending:
            self._pending.add(uid)
            self.loop.call_later(self.loop.uniform(self.delay), self._sync, uid)

    def _sync(self, uid: str) -> None:
        self._pending.discard(uid)
        rs = self.sets.get(uid)
        if rs is None:
            return
        self._write_status(rs)
        active = [p for p in rs.pods.values() if is_active(p)]
        diff = rs.replicas - len(active)
        if diff > 0:
            for _ in range(min(diff, 500)):
                if not self._create_pod(rs):
                    break  # slowStartBatch stops at the first error
        elif diff < 0:
            # Prefer unscheduled, then not ready, then newest, as ActivePodsWithRanks does.
            active.sort(key=_deletion_rank)
            for pod in active[:-diff]:
                meta = pod["metadata"]
                try:
                    self.api.delete("pods", meta["namespace"], meta["name"])
                except ApiError:
                    continue
                self.recorder.event(
                    rs.as_obj(), "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}"
                )

    def _create_pod(self, rs: Owner) -> bool:
        tmpl = rs.template
        meta = copy.deepcopy(tmpl.get("metadata") or {})
        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "generateName": f"{rs.name}-",
                "namespace": rs.namespace,
                "labels": meta.get("labels") or {},
                "ownerReferences": [rs.owner_ref()],
            },
            "spec": copy.deepcopy(tmpl["spec"]),
        }
        if meta.get("annotations"):
            pod["metadata"]["annotations"] = meta["annotations"]
        try:
            created = self.api.create("pods", pod)
        except ApiError as exc:
            self._failed(rs, exc)
            return False
        self.failures.pop(rs.uid, None)  # the queue's Forget
        rs.pods[created["metadata"]["uid"]] = created
        self.recorder.event(
            rs.as_obj(), "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )
        return True

    def _failed(self, rs: Owner, exc: ApiError) -> None:
        """controller_utils.go RealPodControl: a Warning ``FailedCreate`` "Error creating:
        <the API error>" (every version); the sync fails and the key goes back on the
        work queue rate-limited (client-go DefaultControllerRateLimiter: 5 ms doubling per
        failure, at most 1000 s), so the event repeats at that pace."""
        self.recorder.event(rs.as_obj(), "Warning", "FailedCreate", f"Error creating: {exc}")
        failures = self.failures.get(rs.uid, 0)
        self.failures[rs.uid] = failures + 1
        delay = min(0.005 * 2**failures, 1000.0)
        self.loop.call_later(delay, self._sync_soon, rs.uid)

    def delete(self, rs: Owner) -> None:
        """The ReplicaSet goes, then garbage collection of its pods (background propagation)."""
        self.sets.pop(rs.uid, None)
        delete_object(self.api, rs)
        for pod in list(rs.pods.values()):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.api.delete("pods", meta["namespace"], meta["name"])


def _deletion_rank(pod: Obj) -> tuple[int, int, str]:
    return (
        1 if pod["spec"].get("nodeName") else 0,
        1 if is_ready(pod) else 0,
        _neg(pod["metadata"]["creationTimestamp"]),
    )


def _neg(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)
