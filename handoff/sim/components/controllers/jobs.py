"""The job-controller (pkg/controller/job): pods until ``completions`` succeed or
``backoffLimit`` fail, with the job-tracking finalizer (1.26+) and ttlSecondsAfterFinished."""

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
    write_status,
)
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import Obj, new_uid, stamp

JOB_FINALIZER = "batch.kubernetes.io/job-tracking"


class Jobs:
    """The job-controller: pods with the job-tracking finalizer, completions, backoffLimit."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.loop = api.loop
        self.recorder = CoreRecorder(api, "job-controller")
        self.jobs: dict[str, Owner] = {}
        self.state: dict[str, dict[str, int]] = {}
        api.subscribe("pods", self._on_pod, predicate=is_owned)

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
        active = sum(1 for p in job.pods.values() if is_active(p))
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
        active = [p for p in job.pods.values() if is_active(p)]
        for name, value in (
            ("active", len(active)),
            ("succeeded", st["succeeded"]),
            ("failed", st["failed"]),
        ):
            if value:
                status[name] = value
        status["ready"] = sum(1 for p in active if is_ready(p))
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
