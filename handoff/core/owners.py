"""Pods by the workload that owns them: the controllers that create no pods, and the
owners whose pods keep ending the same way (a loop), each one incident, not fifty rows.

Plain data fed by the fold (``Timeline.apply`` hands it the Events about workloads and
each Pod's first sight) and by whoever judges pods (``note_ending``: the live fold at each
flush, the triage report as it ranks); ``snapshot`` stores it with the timeline.

What the upstream code writes, by version (docs/cli.md, "Owners"):

* ReplicaSet, ReplicationController, Job (1.x-current) and DaemonSet:
  pkg/controller/controller_utils.go ``RealPodControl`` records ``FailedCreate`` (Warning,
  "Error creating: <API error>") and ``SuccessfulCreate`` ("Created pod: <name>"),
  ``FailedDelete``/``SuccessfulDelete`` alike ("Error deleting: ...").
* StatefulSet: pkg/controller/statefulset/stateful_pod_control.go ``recordPodEvent``,
  ``FailedCreate`` "create Pod <pod> in StatefulSet <set> failed error: <API error>" and
  ``SuccessfulCreate`` "create Pod <pod> in StatefulSet <set> successful" (1.5-current).
* The API error says why: ResourceQuota admission "exceeded quota: ..." (all versions),
  LimitRanger "forbidden: [minimum/maximum ... usage per Container ...]", PodSecurity
  admission "violates PodSecurity \"<level>:<version>\": ..." (beta 1.23, GA 1.25),
  validating/mutating webhooks "admission webhook \"<name>\" denied the request: ..." and,
  when unreachable or slow, "failed calling webhook \"<name>\": ... context deadline
  exceeded" (1.16-current; the older "Post ...: net/http: request canceled (Client.Timeout
  exceeded ...)" also), a namespace being deleted "unable to create new content in
  namespace <ns> because it is being terminated", a missing service account "error looking
  up service account <ns>/<sa>" (or, as 1.8 wrote it, "service account <ns>/<sa> was not
  found, retry after the service account is created").
* Deployment (deployment/sync.go, every version): ``ReplicaSetCreateError`` "Failed to
  create new replica set <name>: <API error>" when even the ReplicaSet cannot be made;
  ``ScalingReplicaSet`` once it scales one. CronJob (cronjob_controllerv2.go, the default
  from 1.21; the v1 controller before wrote the same): ``FailedCreate`` "Error creating
  job: <API error>", ``SuccessfulCreate`` "Created job <name>".
* Job ``BackoffLimitExceeded`` / ``DeadlineExceeded`` are not creation failures: the pods
  were created and failed (their verdicts say so); they are not read here.

A Deployment owns its pods through a ReplicaSet named ``<deployment>-<pod-template-hash>``
(pkg/controller/deployment/sync.go, 1.x-current; the pods carry the same
``pod-template-hash`` label): a pod whose ReplicaSet's name ends in its label's value is
grouped under the Deployment. Without the label the ReplicaSet stays the owner: a
ReplicaSet of the same shape may have been made by hand.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from handoff.core import verdicts as v
from handoff.core.facts import EventFacts
from handoff.core.podstate import FINISHED, REJECTED, PodState
from handoff.core.trace import format_time

# Kinds whose controllers create pods (controller_utils.go, the StatefulSet's own pod
# control), or the objects that make them (a Deployment its ReplicaSets, a CronJob its
# Jobs), and say so in Events.
WORKLOAD_KINDS = frozenset(
    {
        "ReplicaSet",
        "StatefulSet",
        "Job",
        "DaemonSet",
        "ReplicationController",
        "Deployment",
        "CronJob",
    }
)
# ReplicaSetCreateError: the Deployment controller could not create its new ReplicaSet
# (deployment/sync.go getNewReplicaSet, "Failed to create new replica set <name>: <error>").
# The CronJob controller's own FailedCreate reads "Error creating job: <error>".
FAILURE_REASONS = frozenset({"FailedCreate", "FailedDelete", "ReplicaSetCreateError"})
# ScalingReplicaSet: the Deployment has a ReplicaSet it scales ("Scaled up replica set ...").
SUCCESS_REASONS = frozenset({"SuccessfulCreate", "ScalingReplicaSet"})
# Verdicts that end a pod: an owner whose pods keep ending one of these ways is a loop.
LOOP_VERDICTS = frozenset({v.PODGC_DELETED, v.REJECTED, v.EVICTED, v.NODE_LOST, v.FAILED})
LOOP_LEAST = 3  # pods ending the same way before it counts as a loop
LOOP_WINDOW = 3600.0  # seconds: endings older than this (before the newest) do not count
KEPT_ENDINGS = 100  # per owner, the newest
LOOP_PODS_SHOWN = 5
# The API server keeps Events an hour by default (--event-ttl=1h) and a failing
# controller repeats its event on every retry: a failure not repeated for that long
# means the controller stopped trying or the owner is gone; the streams cannot tell.
STALE_AFTER = 3600.0

# (cause, pattern) in the order they are tried on a failure's message.
_CAUSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("quota", re.compile(r"exceeded quota")),
    ("pod-security", re.compile(r"violates PodSecurity")),
    ("webhook-denied", re.compile(r"admission webhook .* denied the request")),
    (
        "webhook-unreachable",
        re.compile(r"failed calling webhook|failed to call webhook|Client\.Timeout exceeded"),
    ),
    ("limit-range", re.compile(r"(minimum|maximum) \S+ usage per|ratio to request")),
    ("namespace-terminating", re.compile(r"because it is being terminated")),
    (
        "service-account",
        re.compile(r"error looking up service account|service account \S+ was not found"),
    ),
)
_REMEDIES = {
    "quota": "A ResourceQuota of the namespace is used up: raise it, or lower the "
    "requests or replicas of what runs there.",
    "pod-security": "The namespace's PodSecurity level refuses the pod template: fix the "
    "template's securityContext, or relabel the namespace (pod-security.kubernetes.io/"
    "enforce) if the workload needs the privilege.",
    "webhook-denied": "An admission webhook refuses the pod template: its message says why.",
    "webhook-unreachable": "An admission webhook did not answer in time: check the "
    "webhook's service and pods; with failurePolicy Fail every pod creation waits on it.",
    "limit-range": "A LimitRange of the namespace refuses the template's requests or limits.",
    "namespace-terminating": "The namespace is being deleted: nothing new is created in it.",
    "service-account": "The template names a service account that does not exist.",
    "other": "The controller cannot create pods: its message says why.",
}


class Failure(msgspec.Struct, gc=False):
    """The latest failure Event about one owner (a repeat updates it)."""

    kind: str
    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    component: str
    first: float | None
    last: float
    count: int
    resolved: float | None = None  # when the controller was seen creating again


class Ending(msgspec.Struct, gc=False):
    name: str
    at: float
    verdict: str
    reason: str


class OwnerData(msgspec.Struct, gc=False):
    """An ``OwnerBook`` as plain data (what a snapshot stores)."""

    failures: list[Failure] = []
    deployments: dict[str, str] = {}
    endings: dict[str, dict[str, Ending]] = {}


def owner_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace}/{name}"


class OwnerBook:
    """What the fold knows of owners, keyed ``kind/namespace/name``: sized by owners."""

    def __init__(self, data: OwnerData | None = None) -> None:
        data = data or OwnerData()
        self.failures: dict[str, Failure] = {
            owner_key(f.kind, f.namespace, f.name): f for f in data.failures
        }
        # "namespace/replicaset" -> deployment, learned from pods' pod-template-hash.
        self.deployments: dict[str, str] = dict(data.deployments)
        # owner key (its workload's) -> uid -> how that pod ended.
        self.endings: dict[str, dict[str, Ending]] = {k: dict(e) for k, e in data.endings.items()}
        self.dirty: set[str] = set()  # owner keys changed since the last ``take_dirty``

    def data(self) -> OwnerData:
        return OwnerData(list(self.failures.values()), self.deployments, self.endings)

    # ---------------------------------------------------------------- fold

    def apply_event(self, observed: float, facts: EventFacts) -> None:
        """An Event about a workload: a failure to create (or delete) its pods, or the
        controller creating again, which resolves an earlier failure."""
        if not facts.name:
            return
        key = owner_key(facts.kind, facts.namespace or "default", facts.name)
        last = facts.last or facts.first or observed
        known = self.failures.get(key)
        if facts.reason in SUCCESS_REASONS:
            # Strictly later: a success in the failure's own (1-second) second may be the
            # creation just before the one that failed.
            if known is not None and known.resolved is None and last > known.last:
                known.resolved = last
                self.dirty.add(key)
            return
        if facts.reason not in FAILURE_REASONS:
            return
        same = known is not None and known.uid == (facts.uid or "")
        if known is not None and same and last <= known.last:
            return  # a repeat already folded, or an older one (a relist)
        # A creation seen after this failure still resolves it.
        resolved = known.resolved if known is not None and same else None
        self.failures[key] = Failure(
            facts.kind,
            facts.namespace or "default",
            facts.name,
            facts.uid or "",
            facts.reason,
            facts.message,
            facts.component,
            known.first if known is not None and same else facts.first,
            last,
            facts.count,
            resolved if resolved is not None and resolved > last else None,
        )
        self.dirty.add(key)

    def note_pod(self, pod: PodState, template_hash: str, created: float | None) -> None:
        """A pod first seen: the Deployment behind its ReplicaSet, and a creation by its
        owner after a failure (the controller creates again)."""
        if pod.owner is None:
            return
        kind, name = pod.owner
        if kind == "ReplicaSet" and template_hash and name.endswith("-" + template_hash):
            self.deployments[f"{pod.namespace}/{name}"] = name[: -len(template_hash) - 1]
        if created is None:
            return
        key = owner_key(kind, pod.namespace, name)
        failure = self.failures.get(key)
        if failure is not None and failure.resolved is None and created > failure.last:
            failure.resolved = created
            self.dirty.add(key)

    def workload(self, namespace: str, owner: tuple[str, str] | None) -> tuple[str, str] | None:
        """The (kind, name) a pod with this direct owner is grouped under."""
        if owner is None:
            return None
        if owner[0] == "ReplicaSet":
            deployment = self.deployments.get(f"{namespace}/{owner[1]}")
            if deployment is not None:
                return ("Deployment", deployment)
        return owner

    # ------------------------------------------------------------- endings

    def note_ending(self, pod: PodState, verdict: str, reason: str | None) -> None:
        """A pod judged: remember how it ended (or forget it, when it has not) under its
        workload. Only owned pods count; bare pods have no one to loop."""
        owner = self.workload(pod.namespace, pod.owner)
        if owner is None:
            return
        key = owner_key(owner[0], pod.namespace, owner[1])
        entries = self.endings.get(key)
        if verdict not in LOOP_VERDICTS:
            if entries is not None and entries.pop(pod.uid, None) is not None:
                self.dirty.add(key)
            return
        ending = Ending(pod.name, _ended_at(pod), verdict, reason or "")
        if entries is None:
            entries = self.endings[key] = {}
        elif entries.get(pod.uid) == ending:
            return
        entries[pod.uid] = ending
        if len(entries) > KEPT_ENDINGS:
            oldest = min(entries, key=lambda uid: entries[uid].at)
            del entries[oldest]
        self.dirty.add(key)

    def forget(self, horizon: float) -> None:
        """Drop endings and failures last seen before ``horizon`` (the fold's retention):
        the book stays sized by the owners of the retained time."""
        for key in [k for k, f in self.failures.items() if f.last < horizon]:
            del self.failures[key]
            self.dirty.add(key)
        for key, entries in list(self.endings.items()):
            old = [uid for uid, e in entries.items() if e.at < horizon]
            for uid in old:
                del entries[uid]
            if old:
                self.dirty.add(key)
            if not entries:
                del self.endings[key]

    def take_dirty(self) -> set[str]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    # ---------------------------------------------------------------- read

    def record(self, key: str, now: float) -> dict[str, Any] | None:
        """What is shown of one owner: its failure (unresolved) and its loop, or None."""
        failure = self.failures.get(key)
        shown = failure_view(failure, self, now) if failure and failure.resolved is None else None
        loop = loop_of(key, self.endings.get(key, {}), now)
        if shown is None and loop is None:
            return None
        kind, namespace, name = key.split("/", 2)
        return {
            "owner": {"kind": kind, "namespace": namespace, "name": name},
            "failure": shown,
            "loop": loop,
        }

    def failing(self, now: float, resolved: bool = False) -> list[dict[str, Any]]:
        """Owners whose controller fails to create pods, newest failure first."""
        rows = [
            failure_view(f, self, now)
            for f in self.failures.values()
            if resolved or f.resolved is None
        ]
        rows.sort(key=lambda row: row["last"], reverse=True)
        return rows

    def loops(self, now: float) -> list[dict[str, Any]]:
        """Owners whose pods keep ending the same way, the most pods first; ``active``
        when the newest ending is within ``LOOP_WINDOW`` of ``now``."""
        found = (loop_of(key, entries, now) for key, entries in self.endings.items())
        return sorted(
            (loop for loop in found if loop is not None), key=lambda x: (-x["count"], x["key"])
        )


def _ended_at(pod: PodState) -> float:
    """When the pod ended: refused or finished if it was (a Failed pod deleted a day later
    ended when it failed), else its latest milestone (the deletion)."""
    m = pod.milestones
    for slot in (REJECTED, FINISHED):
        if m[slot] is not None:
            return m[slot]
    known = [t for t in m if t is not None]
    return max(known) if known else pod.last_change


def loop_of(key: str, entries: dict[str, Ending], now: float) -> dict[str, Any] | None:
    """The loop of one owner: the commonest way its pods ended within ``LOOP_WINDOW`` of
    the newest ending, when at least ``LOOP_LEAST`` pods ended so."""
    if len(entries) < LOOP_LEAST:
        return None
    newest = max(e.at for e in entries.values())
    groups: dict[tuple[str, str], list[Ending]] = {}
    for ending in entries.values():
        if ending.at >= newest - LOOP_WINDOW:
            groups.setdefault((ending.verdict, ending.reason), []).append(ending)
    (verdict, reason), same = max(groups.items(), key=lambda item: (len(item[1]), item[0]))
    if len(same) < LOOP_LEAST:
        return None
    same.sort(key=lambda e: e.at)
    first, last = same[0].at, same[-1].at
    every = (last - first) / (len(same) - 1)
    kind, namespace, name = key.split("/", 2)
    return {
        "key": key,
        "owner": {"kind": kind, "namespace": namespace, "name": name},
        "verdict": verdict,
        "reason": reason or None,
        "count": len(same),
        "first": format_time(first),
        "last": format_time(last),
        "every_seconds": round(every, 1) if every > 0 else None,
        "per_hour": round(3600 / every, 1) if every > 0 else None,
        "pods": [e.name for e in reversed(same[-LOOP_PODS_SHOWN:])],
        "active": now - last <= LOOP_WINDOW,
        "summary": _loop_summary(verdict, reason, len(same), every),
    }


def _loop_summary(verdict: str, reason: str, count: int, every: float) -> str:
    how = f"{verdict} ({reason})" if reason else verdict
    pace = f", one every {_span(every)}" if every > 0 else " at once"
    return f"{count} pods {how}{pace}"


def _span(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def cause(message: str) -> str:
    """Why a controller could not create pods, from the API error in its message."""
    for name, pattern in _CAUSES:
        if pattern.search(message):
            return name
    return "other"


def stale_note(kind: str) -> str:
    """What a failure not repeated for ``STALE_AFTER`` adds to its explanation."""
    return (
        f" Not repeated for over {STALE_AFTER / 3600:.0f}h: the controller stopped trying,"
        f" or the {kind} is gone (Handoff does not watch {kind}s, so the streams cannot"
        " tell which)."
    )


def failure_view(failure: Failure, book: OwnerBook, now: float) -> dict[str, Any]:
    """A failure as the CLI, the API and the board show it."""
    why = cause(failure.message)
    deployment = (
        book.deployments.get(f"{failure.namespace}/{failure.name}")
        if failure.kind == "ReplicaSet"
        else None
    )
    stale = now - failure.last > STALE_AFTER
    explanation = _REMEDIES[why] + (stale_note(failure.kind) if stale else "")
    return {
        "key": owner_key(failure.kind, failure.namespace, failure.name),
        "owner": {"kind": failure.kind, "namespace": failure.namespace, "name": failure.name},
        "workload": {"kind": "Deployment", "name": deployment} if deployment else None,
        "reason": failure.reason,
        "cause": why,
        "message": failure.message,
        "source": failure.component,
        "first": format_time(failure.first) if failure.first is not None else None,
        "last": format_time(failure.last),
        "count": failure.count,
        "resolved": format_time(failure.resolved) if failure.resolved is not None else None,
        "stale": stale,
        "explanation": explanation,
    }
