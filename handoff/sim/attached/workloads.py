"""Deployments and Jobs of an attached scenario: API objects handed to the real control
plane, whose deployment, replicaset and job controllers create the pods.

The same calls as the simulator's own controllers (``apply``, ``create``, the
``deployments`` they keep), so a scenario script runs unchanged attached.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from handoff.sim.components.apiserver import APIServer
from handoff.sim.objects import Obj


@dataclass
class Workload:
    """What a scenario reads back about a workload it made."""

    namespace: str
    name: str
    template: Obj
    replicas: int


class RemoteDeployments:
    """apps/v1 Deployments written to the real API server."""

    def __init__(self, api: APIServer) -> None:
        self.api = api
        self.deployments: dict[tuple[str, str], Workload] = {}

    def apply(
        self, namespace: str, name: str, template: Obj, replicas: int, meta: Obj | None = None
    ) -> Workload:
        """Create the Deployment, or change its template and replicas (a rollout)."""
        key = (namespace, name)
        spec = {
            "replicas": replicas,
            "selector": {"matchLabels": _labels(template)},
            "template": copy.deepcopy(template),
        }
        current = self.api.find("deployments", namespace, name)
        if current is None:
            metadata = {**(meta or {}), "name": name, "namespace": namespace}
            body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata}
            self.api.create("deployments", {**body, "spec": spec})
        else:
            self.api.update("deployments", {**current, "spec": {**current["spec"], **spec}})
        workload = Workload(namespace, name, template, replicas)
        self.deployments[key] = workload
        return workload


class RemoteJobs:
    """batch/v1 Jobs written to the real API server."""

    def __init__(self, api: APIServer) -> None:
        self.api = api

    def create(
        self,
        namespace: str,
        name: str,
        template: Obj,
        completions: int = 1,
        parallelism: int = 1,
        backoff_limit: int = 6,
        ttl_after_finished: float | None = None,
    ) -> Workload:
        spec: Obj = {
            "completions": completions,
            "parallelism": parallelism,
            "backoffLimit": backoff_limit,
            "template": copy.deepcopy(template),
        }
        if ttl_after_finished is not None:
            spec["ttlSecondsAfterFinished"] = int(ttl_after_finished)
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
        self.api.create("jobs", job)
        return Workload(namespace, name, template, parallelism)


def _labels(template: Obj) -> dict[str, str]:
    return dict((template.get("metadata") or {}).get("labels") or {})
