"""Workload controllers: Deployment -> ReplicaSet -> Pods, and Jobs.

Each Deployment, ReplicaSet and Job is an API object (resources ``deployments``,
``replicasets``, ``jobs``: served over HTTP, not recorded) whose spec the controller writes
when it creates or scales it and whose status it writes when its pods change, as the
real controllers do; the controller's working state (its pods, the Job's counters) stays
in an ``Owner``. Pods carry real ownerReferences and the controllers write the events real
ones do (ScalingReplicaSet, SuccessfulCreate, SuccessfulDelete, Completed).
"""

from handoff.sim.components.controllers.deployments import Deployments
from handoff.sim.components.controllers.jobs import JOB_FINALIZER, Jobs
from handoff.sim.components.controllers.owners import Owner
from handoff.sim.components.controllers.replicasets import ReplicaSets

__all__ = ["JOB_FINALIZER", "Deployments", "Jobs", "Owner", "ReplicaSets"]
