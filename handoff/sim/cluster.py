"""A whole simulated cluster: API server, control-plane controllers and one kubelet per node,
with the operations scenarios script (create/delete pods, taints, faults)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from handoff.sim.attached import MirrorAPI, Remote, RemoteDeployments, RemoteJobs
from handoff.sim.clock import EPOCH, Loop
from handoff.sim.components.apiserver import ApiError, APIServer
from handoff.sim.components.controllers import Deployments, Jobs, ReplicaSets
from handoff.sim.components.kubelet import Kubelet, KubeletTimings
from handoff.sim.components.nodelifecycle import NodeLifecycle, TaintEviction
from handoff.sim.components.podgc import PodGC
from handoff.sim.components.scheduler import Scheduler, SchedulerTimings
from handoff.sim.objects import Obj, edit, new_uid, stamp
from handoff.sim.objects import node as make_node


@dataclass
class ClusterConfig:
    """Every knob of the simulated control plane; defaults follow HANDOFF_FACTS."""

    name: str = "sim"
    seed: int = 0
    start: float = EPOCH  # virtual time zero; --serve starts at the wall clock's now
    node_monitor_grace: float = 40.0
    podgc_condition: bool = True
    podgc_period: float = 20.0
    podgc_quarantine: float = 40.0
    terminated_pod_threshold: int = 12500
    taint_eviction_component: str = "taint-eviction-controller"
    history: int = 20000
    kubelet_version: str = "v1.33.1"  # what the nodes report in status.nodeInfo
    graceful_deletes: bool = False  # APIServer.graceful_deletes: MODIFIED before DELETED
    # The old event recorder's core/v1 Events without reportingComponent/Instance (as seen
    # on v1.20.2; the simulator's default fills them in, as newer client-go does).
    legacy_event_reporting: bool = False
    # The taint manager's DisruptionTarget DeletionByTaintManager (1.26+).
    taint_disruption_condition: bool = True
    # node-controller's RegisteredNode and RemovingNode events (off by default: 5,000
    # nodes' worth would swamp `scale`'s start).
    node_controller_events: bool = False
    # The unreachable NoExecute taint one monitor pass (5 s) after the NoSchedule one, as
    # v1.20.2 writes them; by default both in one update.
    noexecute_next_pass: bool = False
    # Attached to a real API server (``simulate --attach``): the kubelets write to it, and
    # its control plane schedules, binds, collects and evicts; none of ours runs.
    remote: Remote | None = None
    scheduler: SchedulerTimings = field(default_factory=SchedulerTimings)
    kubelet: KubeletTimings = field(default_factory=KubeletTimings)


class Cluster:
    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        c = self.config
        self.loop = Loop(c.seed, c.start)
        self.kubelets: dict[str, Kubelet] = {}
        self.daemon_uid: dict[str, str] = {}
        if c.remote is not None:
            self._attach(c.remote)
            return
        self.api = APIServer(self.loop, history=c.history)
        self.api.graceful_deletes = c.graceful_deletes
        self.api.legacy_event_reporting = c.legacy_event_reporting
        self.scheduler = Scheduler(self.api, c.scheduler)
        self.podgc = PodGC(
            self.api,
            c.podgc_period,
            c.podgc_quarantine,
            c.podgc_condition,
            c.terminated_pod_threshold,
        )
        self.node_lifecycle = NodeLifecycle(
            self.api,
            grace=c.node_monitor_grace,
            node_events=c.node_controller_events,
            noexecute_next_pass=c.noexecute_next_pass,
        )
        self.taint_eviction = TaintEviction(
            self.api, c.taint_eviction_component, c.taint_disruption_condition
        )
        self.replicasets = ReplicaSets(self.api)
        self.deployments = Deployments(self.api, self.replicasets)
        self.jobs: Jobs | RemoteJobs = Jobs(self.api)

    def _attach(self, remote: Remote) -> None:
        """Kubelets only, on a mirror of the real API server; workloads go to its
        controllers."""
        self.api = MirrorAPI(self.loop, remote, history=self.config.history)
        self.api.legacy_event_reporting = self.config.legacy_event_reporting
        self.deployments = RemoteDeployments(self.api)  # type: ignore[assignment]
        self.jobs = RemoteJobs(self.api)

    @property
    def attached(self) -> bool:
        return self.config.remote is not None

    # --- time ------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.loop.now

    def at(self, seconds: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn`` at ``seconds`` after the start of the simulation."""
        self.loop.call_at(self.loop.start + seconds, fn, *args)

    # --- nodes -----------------------------------------------------------------------------

    def add_node(
        self,
        name: str,
        *,
        cpu: str = "4",
        memory: str = "8Gi",
        pods: int = 110,
        labels: dict[str, str] | None = None,
        taints: list[Obj] | None = None,
        static_pods: list[Obj] | None = None,
        images: tuple[str, ...] = (),
    ) -> Kubelet:
        index = len(self.kubelets) + 1
        obj = make_node(
            name,
            cpu=cpu,
            memory=memory,
            pods=pods,
            labels=labels,
            taints=taints,
            index=index,
            kubelet_version=self.config.kubelet_version,
        )
        kubelet = Kubelet(self.api, obj, self.config.kubelet, static_pods, images)
        self.kubelets[name] = kubelet
        kubelet.register()
        return kubelet

    def delete_node(self, name: str) -> None:
        """kubectl delete node (or the cloud node controller): the Node object goes away."""
        with contextlib.suppress(ApiError):
            self.api.delete("nodes", "", name)

    def taint(self, node_name: str, key: str, value: str | None, effect: str) -> None:
        node = self.api.get("nodes", "", node_name)
        new = edit(node, "spec")
        taint: Obj = {"key": key}
        if value is not None:
            taint["value"] = value
        taint["effect"] = effect
        if effect == "NoExecute":
            taint["timeAdded"] = stamp(self.now)
        new["spec"]["taints"] = [*(node["spec"].get("taints") or ()), taint]
        self.api.update("nodes", new)

    def untaint(self, node_name: str, key: str) -> None:
        node = self.api.get("nodes", "", node_name)
        new = edit(node, "spec")
        new["spec"]["taints"] = [t for t in node["spec"].get("taints") or () if t["key"] != key]
        if not new["spec"]["taints"]:
            del new["spec"]["taints"]
        self.api.update("nodes", new)

    def cordon(self, node_name: str, on: bool = True) -> None:
        node = self.api.get("nodes", "", node_name)
        new = edit(node, "spec")
        if on:
            new["spec"]["unschedulable"] = True
        else:
            new["spec"].pop("unschedulable", None)
        self.api.update("nodes", new)

    def fault(self, node_name: str, mode: str) -> None:
        """hang (heartbeats go on, pods wait), stop (kubelet down), die (the machine is gone),
        die-on-pickup (dies the moment it sees its next pod), not-ready (the kubelet runs but
        reports Ready=False), memory-pressure (the kubelet evicts one pod), resume."""
        kubelet = self.kubelets[node_name]
        if mode == "hang":
            kubelet.hang()
        elif mode == "stop":
            kubelet.stop()
        elif mode == "die":
            kubelet.die()
        elif mode == "die-on-pickup":
            kubelet.die_on_pickup = True
        elif mode == "not-ready":
            kubelet.report_not_ready()
        elif mode == "memory-pressure":
            kubelet.press_memory()
        elif mode == "resume":
            kubelet.resume()
        else:
            raise ValueError(f"unknown fault {mode!r}")

    # --- pods ------------------------------------------------------------------------------

    def create_pod(self, pod: Obj) -> Obj | None:
        try:
            return self.api.create("pods", pod)
        except ApiError:
            return None

    def delete_pod(self, namespace: str, name: str, grace: int | None = None) -> None:
        try:  # noqa: SIM105 (contextlib.suppress costs three calls; churn deletes 400/s)
            self.api.delete("pods", namespace, name, grace)
        except ApiError:
            pass

    def daemon_pod(
        self,
        daemonset: str,
        node_name: str,
        template_spec: Obj,
        namespace: str = "kube-system",
        labels: dict[str, str] | None = None,
    ) -> None:
        """A DaemonSet pod as the daemonset controller creates it: scheduled by the scheduler
        through a required node affinity on metadata.name, tolerating everything."""
        uid = self.daemon_uid.get(daemonset)
        if uid is None:
            uid = self.daemon_uid[daemonset] = new_uid(self.loop.rng)
        spec = dict(template_spec)
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node_name]}
                            ]
                        }
                    ]
                }
            }
        }
        spec["tolerations"] = [{"operator": "Exists"}]
        pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "generateName": f"{daemonset}-",
                "namespace": namespace,
                "labels": dict(labels or {"app": daemonset}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": daemonset,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }
        if self.attached:
            # No DaemonSet object exists there: the real garbage collector would delete a
            # pod owned by a missing owner, so attached daemon pods stand alone.
            del pod["metadata"]["ownerReferences"]
        self.create_pod(pod)
