"""Workload controllers: Deployment -> ReplicaSet -> Pods, and Jobs.

Each Deployment, ReplicaSet and Job is an API object (resources ``deployments``,
``replicasets``, ``jobs``: served over HTTP, not recorded) whose spec the controller writes
when it creates or scales it and whose status it writes when its pods change, as the
real controllers do; the controller's working state (its pods, the Job's counters) stays
in an ``Owner``. Pods carry real ownerReferences and the controllers write the events real
ones do (ScalingReplicaSet, SuccessfulCreate, SuccessfulDelete, Completed).
Like the real ReplicaSet controller, failed pods do not count as replicas: a template with a
nodeName that the kubelet rejects makes the ReplicaSet create replacement after replacement.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from dataclasses import dataclass, field

import orjson

from handoff.sim.components.apiserver import ALPHABET, ApiError, APIServer
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import Obj, new_uid, stamp

JOB_FINALIZER = "batch.kubernetes.io/job-tracking"
RESOURCE_OF = {"Deployment": "deployments", "ReplicaSet": "replicasets", "Job": "jobs"}


def write_spec(api: APIServer, owner: Owner, spec: Obj) -> None:
    """Write a changed spec (a new generation), keeping what else is stored."""
    current = api.find(owner.resource, owner.namespace, owner.name)
    if current is None or current["metadata"]["uid"] != owner.uid or current["spec"] == spec:
        return
    meta = dict(current["metadata"])
    meta["generation"] = meta.get("generation", 1) + 1
    owner.obj = api.update(owner.resource, {**current, "metadata": meta, "spec": spec})


def write_status(api: APIServer, owner: Owner, status: Obj) -> None:
    """The status subresource: written only when it changed."""
    current = api.find(owner.resource, owner.namespace, owner.name)
    if current is None or current["metadata"]["uid"] != owner.uid or current["status"] == status:
        return
    owner.obj = api.update(owner.resource, {**current, "status": status})


def delete_object(api: APIServer, owner: Owner) -> None:
    current = api.find(owner.resource, owner.namespace, owner.name)
    if current is not None and current["metadata"]["uid"] == owner.uid:
        api.delete(owner.resource, owner.namespace, owner.name)


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
    obj: Obj | None = None  # the API object, as last written

    @property
    def resource(self) -> str:
        return RESOURCE_OF[self.kind]

    def as_obj(self) -> Obj:
        if self.obj is not None:
            return self.obj
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
        active = [p for p in rs.pods.values() if _active(p)]
        ready = sum(1 for p in active if _ready(p))
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
        """The ReplicaSet goes, then garbage collection of its pods (background propagation)."""
        self.sets.pop(rs.uid, None)
        delete_object(self.api, rs)
        for pod in list(rs.pods.values()):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.api.delete("pods", meta["namespace"], meta["name"])


class Deployments:
    """The deployment-controller: one ReplicaSet per template, rolling updates."""

    def __init__(
        self, api: APIServer, replicasets: ReplicaSets, delay: tuple[float, float] = (0.005, 0.05)
    ) -> None:
        self.api = api
        self.loop = api.loop
        self.rs = replicasets
        self.delay = delay
        self.recorder = CoreRecorder(api, "deployment-controller")
        self.deployments: dict[tuple[str, str], Owner] = {}
        self.sets: dict[tuple[str, str], list[Owner]] = {}
        self._pending: set[tuple[str, str]] = set()
        api.subscribe("replicasets", self._on_replicaset, predicate=_owned)

    def apply(
        self, namespace: str, name: str, template: Obj, replicas: int, meta: Obj | None = None
    ) -> Owner:
        """Create the Deployment or roll it to a new template (``meta``: the metadata a
        client sent, for labels and annotations)."""
        key = (namespace, name)
        dep = self.deployments.get(key)
        if dep is None:
            dep = Owner(
                "Deployment", "apps/v1", namespace, name, new_uid(self.loop.rng), template, replicas
            )
            self.deployments[key] = dep
            self.sets[key] = []
            dep.obj = self.api.create("deployments", _deployment(dep, meta), uid=dep.uid)
        else:
            spec = dict(dep.as_obj()["spec"], replicas=replicas, template=template)
            write_spec(self.api, dep, spec)
        self._reconcile(dep, template, replicas)
        return dep

    def update_object(self, new: Obj) -> Obj:
        """A PUT or PATCH of the Deployment through the API: store it, then act on it."""
        meta = new["metadata"]
        key = (meta["namespace"], meta["name"])
        dep = self.deployments[key]
        spec = new.get("spec") or {}
        template = spec.get("template") or dep.template
        replicas = spec.get("replicas", dep.replicas)
        current = self.api.get("deployments", *key)
        if spec != current["spec"]:
            meta = dict(meta, generation=current["metadata"].get("generation", 1) + 1)
        dep.obj = self.api.update("deployments", {**new, "metadata": meta})
        self._reconcile(dep, template, replicas)
        return dep.obj

    def _reconcile(self, dep: Owner, template: Obj, replicas: int) -> None:
        key = (dep.namespace, dep.name)
        dep.template = template
        dep.replicas = replicas
        pod_hash = template_hash(template)
        tmpl = copy.deepcopy(template)
        labels = tmpl.setdefault("metadata", {}).setdefault("labels", {})
        labels["pod-template-hash"] = pod_hash
        rs_name = f"{dep.name}-{pod_hash}"
        sets = self.sets[key]
        current = next((s for s in sets if s.name == rs_name), None)
        if current is None:
            revision = {"deployment.kubernetes.io/revision": str(len(sets) + 1)}
            current = self.rs.create(dep.namespace, rs_name, tmpl, 0, dep, revision)
            sets.append(current)
        elif current is not sets[-1]:
            # A rollback to an older template: that ReplicaSet becomes the new one.
            sets.remove(current)
            sets.append(current)
        self._roll(key)
        if key not in self._pending:
            # observedGeneration follows a spec change even when no ReplicaSet changes.
            self._pending.add(key)
            self.loop.call_later(self.delay[0], self._write_status, key)

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
        elif new.replicas > dep.replicas:
            self._scale(dep, new, dep.replicas)
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

    def _on_replicaset(self, type_: str, rs: Obj) -> None:
        owner = rs["metadata"]["ownerReferences"][0]
        key = (rs["metadata"]["namespace"], owner["name"])
        dep = self.deployments.get(key)
        if dep is None or dep.uid != owner["uid"] or key in self._pending:
            return
        self._pending.add(key)
        self.loop.call_later(self.loop.uniform(self.delay), self._write_status, key)

    def _write_status(self, key: tuple[str, str]) -> None:
        """DeploymentStatus from its ReplicaSets' statuses (syncRolloutStatus)."""
        self._pending.discard(key)
        dep = self.deployments.get(key)
        if dep is None:
            return
        sets = [s.as_obj() for s in self.sets[key]]
        total = sum(s["status"].get("replicas", 0) for s in sets)
        ready = sum(s["status"].get("readyReplicas", 0) for s in sets)
        available = sum(s["status"].get("availableReplicas", 0) for s in sets)
        updated = sets[-1]["status"].get("replicas", 0) if sets else 0
        status: Obj = {"observedGeneration": dep.as_obj()["metadata"].get("generation", 1)}
        for name, value in (
            ("replicas", total),
            ("updatedReplicas", updated),
            ("readyReplicas", ready),
            ("availableReplicas", available),
            ("unavailableReplicas", max(0, dep.replicas - available)),
        ):
            if value:
                status[name] = value
        old = dep.as_obj().get("status") or {}
        minimum = dep.replicas - max(0, dep.replicas * 25 // 100)
        status["conditions"] = [
            _deployment_condition(
                old,
                "Available",
                available >= minimum,
                ("MinimumReplicasAvailable", "Deployment has minimum availability.")
                if available >= minimum
                else (
                    "MinimumReplicasUnavailable",
                    "Deployment does not have minimum availability.",
                ),
                self.loop.now,
            ),
            _deployment_condition(
                old,
                "Progressing",
                True,
                (
                    "NewReplicaSetAvailable",
                    f'ReplicaSet "{sets[-1]["metadata"]["name"]}" has successfully progressed.',
                )
                if sets and updated >= dep.replicas and available >= dep.replicas
                else (
                    "ReplicaSetUpdated",
                    f'ReplicaSet "{sets[-1]["metadata"]["name"]}" is progressing.'
                    if sets
                    else "Deployment is progressing.",
                ),
                self.loop.now,
            ),
        ]
        write_status(self.api, dep, status)

    def delete(self, namespace: str, name: str) -> Obj | None:
        """The Deployment goes; garbage collection takes its ReplicaSets and their pods."""
        key = (namespace, name)
        dep = self.deployments.pop(key, None)
        final = None
        if dep is not None:
            final = self.api.delete("deployments", namespace, name)
        for rs in self.sets.pop(key, []):
            self.rs.delete(rs)
        return final


def _deployment(dep: Owner, meta: Obj | None) -> Obj:
    labels = dict((dep.template.get("metadata") or {}).get("labels") or {})
    given = meta or {}
    metadata: Obj = {"name": dep.name, "namespace": dep.namespace, "generation": 1}
    metadata["labels"] = given.get("labels") or labels
    if given.get("annotations"):
        metadata["annotations"] = given["annotations"]
    return {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": metadata,
        "spec": {
            "replicas": dep.replicas,
            "selector": {"matchLabels": labels},
            "template": dep.template,
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {},
    }


def _deployment_condition(old: Obj, type_: str, ok: bool, why: tuple[str, str], now: float) -> Obj:
    value = "True" if ok else "False"
    before = next((c for c in old.get("conditions") or () if c["type"] == type_), None)
    stamp_now = stamp(now)
    changed = before is None or before["status"] != value
    same_reason = before is not None and before.get("reason") == why[0]
    return {
        "type": type_,
        "status": value,
        "lastUpdateTime": before["lastUpdateTime"] if same_reason and not changed else stamp_now,
        "lastTransitionTime": before["lastTransitionTime"] if not changed else stamp_now,
        "reason": why[0],
        "message": why[1],
    }


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
        job.obj = self.api.create(
            "jobs", _job(job, completions, backoff_limit, ttl_after_finished), uid=job.uid
        )
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
            self._write_status(job)
            return
        if st["succeeded"] >= st["completions"]:
            st["done"] = 1
            self._write_status(
                job,
                ("SuccessCriteriaMet", "Complete"),
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            )
            self.recorder.event(job.as_obj(), "Normal", "Completed", "Job completed")
            if st["ttl"] >= 0:
                self.loop.call_later(float(st["ttl"]), self.delete, uid)
            return
        if st["failed"] > st["backoff_limit"]:
            st["done"] = 1
            self._write_status(
                job,
                ("FailureTarget", "Failed"),
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )
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
        self._write_status(job)

    def _write_status(
        self,
        job: Owner,
        finished: tuple[str, str] | None = None,
        reason: str = "",
        message: str = "",
    ) -> None:
        """JobStatus: counters, and the two conditions a finished Job gets (v1.31+)."""
        st = self.state[job.uid]
        old = job.as_obj().get("status") or {}
        status: Obj = {"startTime": old.get("startTime") or stamp(self.loop.now)}
        conditions = list(old.get("conditions") or ())
        if finished is not None:
            now = stamp(self.loop.now)
            for type_ in finished:
                conditions.append(
                    {
                        "type": type_,
                        "status": "True",
                        "lastProbeTime": now,
                        "lastTransitionTime": now,
                        "reason": reason,
                        "message": message,
                    }
                )
            if finished[1] == "Complete":
                status["completionTime"] = now
        elif old.get("completionTime"):
            status["completionTime"] = old["completionTime"]
        if conditions:
            status["conditions"] = conditions
        active = [p for p in job.pods.values() if _active(p)]
        for name, value in (
            ("active", len(active)),
            ("succeeded", st["succeeded"]),
            ("failed", st["failed"]),
        ):
            if value:
                status[name] = value
        status["ready"] = sum(1 for p in active if _ready(p))
        status["terminating"] = sum(
            1 for p in job.pods.values() if p["metadata"].get("deletionTimestamp")
        )
        status["uncountedTerminatedPods"] = {}
        write_status(self.api, job, status)

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

    def delete(self, uid: str) -> Obj | None:
        """The Job goes; garbage collection takes its pods."""
        job = self.jobs.pop(uid, None)
        if job is None:
            return None
        final = self.api.find("jobs", job.namespace, job.name)
        delete_object(self.api, job)
        for pod in list(job.pods.values()):
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.api.delete("pods", meta["namespace"], meta["name"])
        return final


def _job(job: Owner, completions: int, backoff_limit: int, ttl_after_finished: float | None) -> Obj:
    selector = {"batch.kubernetes.io/controller-uid": job.uid}
    template = copy.deepcopy(job.template)
    meta = template.setdefault("metadata", {})
    meta["labels"] = {
        **(meta.get("labels") or {}),
        **selector,
        "batch.kubernetes.io/job-name": job.name,
        "controller-uid": job.uid,
        "job-name": job.name,
    }
    spec: Obj = {
        "parallelism": job.replicas,
        "completions": completions,
        "backoffLimit": backoff_limit,
        "selector": {"matchLabels": selector},
        "manualSelector": False,
        "template": template,
        "completionMode": "NonIndexed",
        "suspend": False,
        "podReplacementPolicy": "TerminatingOrFailed",
    }
    if ttl_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = int(ttl_after_finished)
    return {
        "kind": "Job",
        "apiVersion": "batch/v1",
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "generation": 1,
            "labels": {"batch.kubernetes.io/job-name": job.name, "job-name": job.name},
        },
        "spec": spec,
        "status": {},
    }


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
