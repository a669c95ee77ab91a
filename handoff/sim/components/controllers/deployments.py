"""The deployment-controller (pkg/controller/deployment): a Deployment owns one ReplicaSet per
pod template (named by pod-template-hash) and rolls from the old to the new one."""

from __future__ import annotations

import copy

from handoff.sim.components.apiserver import APIServer
from handoff.sim.components.controllers.owners import (
    Owner,
    is_active,
    is_owned,
    is_ready,
    template_hash,
    write_spec,
    write_status,
)
from handoff.sim.components.controllers.replicasets import ReplicaSets
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import Obj, new_uid, stamp


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
        api.subscribe("replicasets", self._on_replicaset, predicate=is_owned)

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
        ready_new = sum(1 for p in new.pods.values() if is_ready(p))
        for rs in old:
            if ready_new >= new.replicas or not any(is_active(p) for p in new.pods.values()):
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
