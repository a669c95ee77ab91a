"""Workload controllers: Deployment -> ReplicaSet -> Pods, and Jobs.

Deployments, ReplicaSets and Jobs live in the controllers (they are not watched by the
recording), but pods carry real ownerReferences to them and the controllers write the
events real ones do (ScalingReplicaSet, SuccessfulCreate, SuccessfulDelete, Completed).
Like the real ReplicaSet controller, failed pods do not count as replicas: a template with a
nodeName that the kubelet rejects makes the ReplicaSet create replacement after replacement.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from dataclasses import dataclass, field

import orjson

from handoff.sim.apiserver import ALPHABET, ApiError, APIServer
from handoff.sim.events import CoreRecorder
from handoff.sim.objects import Obj, new_uid

JOB_FINALIZER = "batch.kubernetes.io/job-tracking"


def template_hash(template: Obj) -> str:
    """pod-template-hash: a short, stable string from the template (alphabet of SafeEncode)."""
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:10])


@dataclass
class Owner:
    """An owning object kept in memory: enough to build ownerReferences and events."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    template: Obj
    replicas: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)

    def as_obj(self) -> Obj:
        return {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": "1",
            },
        }

    def owner_ref(self) -> Obj:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


class ReplicaSets:
    """The replicaset-controller for every ReplicaSet in the cluster."""

    def __init__(self, api: APIServer, delay: tuple[float, float] = (0.005, 0.05)) -> None:
        self.api = api
        self.loop = api.loop
        self.delay = delay
        self.recorder = CoreRecorder(api, "replicaset-controller")
        self.sets: dict[str, Owner] = {}
        self._pending: set[str] = set()
        api.subscribe("pods", self._on_pod, predicate=_owned)

    def create(self, namespace: str, name: str, template: Obj, replicas: int) -> Owner:
        rs = Owner(
            "ReplicaSet", "apps/v1", namespace, name, new_uid(self.loop.rng), template, replicas
        )
        self.sets[rs.uid] = rs
        self._sync_soon(rs.uid)
        return rs

    def scale(self, rs: Owner, replicas: int) -> None:
        rs.replicas = replicas
        self._sync_soon(rs.uid)

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
        active = [p for p in rs.pods.values() if _active(p)]
        diff = rs.replicas - len(active)
        if diff > 0:
            for _ in range(min(diff, 500)):
                self._create_pod(rs)
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

    def _create_pod(self, rs: Owner) -> None:
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
        except ApiError:
            return
        rs.pods[created["metadata"]["uid"]] = created
        self.recorder.event(
            rs.as_obj(), "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}"
        )

    def delete(self, rs: Owner) -> None:
        """Garbage collection of the ReplicaSet's pods (background propagation)."""
        self.sets.pop(rs.uid, None)
        for pod in list(rs.pods.values()):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.api.delete("pods", meta["namespace"], meta["name"])


class Deployments:
    """The deployment-controller: one ReplicaSet per template, rolling updates."""

    def __init__(self, api: APIServer, replicasets: ReplicaSets) -> None:
        self.api = api
        self.loop = api.loop
        self.rs = replicasets
        self.recorder = CoreRecorder(api, "deployment-controller")
        self.deployments: dict[tuple[str, str], Owner] = {}
        self.sets: dict[tuple[str, str], list[Owner]] = {}

    def apply(self, namespace: str, name: str, template: Obj, replicas: int) -> Owner:
        """Create the Deployment or roll it to a new template."""
        key = (namespace, name)
        dep = self.deployments.get(key)
        if dep is None:
            dep = Owner(
                "Deployment", "apps/v1", namespace, name, new_uid(self.loop.rng), template, replicas
            )
            self.deployments[key] = dep
            self.sets[key] = []
        dep.template = template
        dep.replicas = replicas
        pod_hash = template_hash(template)
        tmpl = copy.deepcopy(template)
        labels = tmpl.setdefault("metadata", {}).setdefault("labels", {})
        labels["pod-template-hash"] = pod_hash
        rs_name = f"{name}-{pod_hash}"
        sets = self.sets[key]
        current = next((s for s in sets if s.name == rs_name), None)
        if current is None:
            current = self.rs.create(namespace, rs_name, tmpl, 0)
            sets.append(current)
        self._roll(key)
        return dep

    def _roll(self, key: tuple[str, str]) -> None:
        """One step of RollingUpdate with maxSurge/maxUnavailable 25%."""
        dep = self.deployments.get(key)
        if dep is None:
            return
        sets = self.sets[key]
        new = sets[-1]
        old = [s for s in sets[:-1] if s.replicas > 0]
        surge = max(1, -(-dep.replicas * 25 // 100))
        if new.replicas < dep.replicas:
            target = dep.replicas if not old else min(dep.replicas, new.replicas + surge)
            self._scale(dep, new, target)
        ready_new = sum(1 for p in new.pods.values() if _ready(p))
        for rs in old:
            if ready_new >= new.replicas or not any(_active(p) for p in new.pods.values()):
                down = max(0, rs.replicas - max(surge, ready_new))
                self._scale(dep, rs, down if ready_new else max(0, rs.replicas - 1))
            break
        if new.replicas < dep.replicas or any(s.replicas for s in sets[:-1]):
            self.loop.call_later(2.0, self._roll, key)

    def _scale(self, dep: Owner, rs: Owner, replicas: int) -> None:
        if replicas == rs.replicas:
            return
        verb = "up" if replicas > rs.replicas else "down"
        self.recorder.event(
            dep.as_obj(),
            "Normal",
            "ScalingReplicaSet",
            f"Scaled {verb} replica set {rs.name} from {rs.replicas} to {replicas}",
        )
        self.rs.scale(rs, replicas)

    def delete(self, namespace: str, name: str) -> None:
        key = (namespace, name)
        self.deployments.pop(key, None)
        for rs in self.sets.pop(key, []):
            self.rs.delete(rs)


class Jobs:
    """The job-controller: pods with the job-tracking finalizer, completions, backoffLimit."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.loop = api.loop
        self.recorder = CoreRecorder(api, "job-controller")
        self.jobs: dict[str, Owner] = {}
        self.state: dict[str, dict[str, int]] = {}
        api.subscribe("pods", self._on_pod, predicate=_owned)

    def create(
        self,
        namespace: str,
        name: str,
        template: Obj,
        completions: int = 1,
        parallelism: int = 1,
        backoff_limit: int = 6,
        ttl_after_finished: float | None = None,
    ) -> Owner:
        job = Owner(
            "Job", "batch/v1", namespace, name, new_uid(self.loop.rng), template, parallelism
        )
        self.jobs[job.uid] = job
        self.state[job.uid] = {
            "completions": completions,
            "succeeded": 0,
            "failed": 0,
            "backoff_limit": backoff_limit,
            "done": 0,
            "ttl": -1 if ttl_after_finished is None else int(ttl_after_finished),
        }
        self.loop.call_later(0.01, self._sync, job.uid)
        return job

    def _on_pod(self, type_: str, pod: Obj) -> None:
        owner = pod["metadata"]["ownerReferences"][0]
        job = self.jobs.get(owner["uid"])
        if job is None:
            return
        uid = pod["metadata"]["uid"]
        if type_ == "DELETED":
            job.pods.pop(uid, None)
        else:
            job.pods[uid] = pod
        self.loop.call_later(self.loop.uniform((0.005, 0.05)), self._sync, job.uid)

    def _sync(self, uid: str) -> None:
        job = self.jobs.get(uid)
        if job is None:
            return
        st = self.state[uid]
        for pod in list(job.pods.values()):
            phase = pod["status"].get("phase")
            if phase in ("Succeeded", "Failed") and JOB_FINALIZER in (
                pod["metadata"].get("finalizers") or ()
            ):
                st["succeeded" if phase == "Succeeded" else "failed"] += 1
                self._drop_finalizer(pod)
        if st["done"]:
            return
        if st["succeeded"] >= st["completions"]:
            st["done"] = 1
            self.recorder.event(job.as_obj(), "Normal", "Completed", "Job completed")
            if st["ttl"] >= 0:
                self.loop.call_later(float(st["ttl"]), self.delete, uid)
            return
        if st["failed"] > st["backoff_limit"]:
            st["done"] = 1
            self.recorder.event(
                job.as_obj(),
                "Warning",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
            return
        active = sum(1 for p in job.pods.values() if _active(p))
        remaining = st["completions"] - st["succeeded"] - active
        for _ in range(max(0, min(job.replicas - active, remaining))):
            self._create_pod(job)

    def _drop_finalizer(self, pod: Obj) -> None:
        current = self.api.find("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
        if current is None:
            return
        new = dict(current)
        meta = dict(current["metadata"])
        meta["finalizers"] = [f for f in meta.get("finalizers") or () if f != JOB_FINALIZER]
        if not meta["finalizers"]:
            del meta["finalizers"]
        new["metadata"] = meta
        with contextlib.suppress(ApiError):
            self.api.update("pods", new)

    def _create_pod(self, job: Owner) -> None:
        tmpl = job.template
        labels = dict((tmpl.get("metadata") or {}).get("labels") or {})
        labels.update(
            {
                "batch.kubernetes.io/controller-uid": job.uid,
                "batch.kubernetes.io/job-name": job.name,
                "controller-uid": job.uid,
                "job-name": job.name,
            }
        )
        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "generateName": f"{job.name}-",
                "namespace": job.namespace,
                "labels": labels,
                "annotations": dict((tmpl.get("metadata") or {}).get("annotations") or {}),
                "ownerReferences": [job.owner_ref()],
                "finalizers": [JOB_FINALIZER],
            },
            "spec": copy.deepcopy(tmpl["spec"]),
        }
        try:
            created = self.api.create("pods", pod)
        except ApiError:
            return
        job.pods[created["metadata"]["uid"]] = created
        self.recorder.event(
            job.as_obj(),
            "Normal",
            "SuccessfulCreate",
            f"Created pod: {created['metadata']['name']}",
        )

    def delete(self, uid: str) -> None:
        job = self.jobs.pop(uid, None)
        if job is None:
            return
        for pod in list(job.pods.values()):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.api.delete("pods", meta["namespace"], meta["name"])


def _owned(pod: Obj) -> bool:
    return bool(pod["metadata"].get("ownerReferences"))


def _active(pod: Obj) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )


def _ready(pod: Obj) -> bool:
    for cond in pod["status"].get("conditions") or ():
        if cond["type"] == "Ready":
            return cond["status"] == "True"
    return False


def _deletion_rank(pod: Obj) -> tuple[int, int, str]:
    return (
        1 if pod["spec"].get("nodeName") else 0,
        1 if _ready(pod) else 0,
        _neg(pod["metadata"]["creationTimestamp"]),
    )


def _neg(text: str) -> str:
    return "".join(chr(0x10FFFF - ord(c)) for c in text)
