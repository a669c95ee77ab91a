"""The kubelet of one node, assembled from its managers the way the real kubelet is
(pkg/kubelet/kubelet.go): the pod watch and the pod workers' pacing live here; node status,
admission, eviction, the pod workers' steps, the status manager and static pods each have
their own module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from handoff.sim.components.apiserver import ApiError, APIServer
from handoff.sim.components.events import CoreRecorder
from handoff.sim.components.kubelet.admission import Admission
from handoff.sim.components.kubelet.eviction import Eviction
from handoff.sim.components.kubelet.node import NodeStatus
from handoff.sim.components.kubelet.podworker import PodWorkers
from handoff.sim.components.kubelet.state import (
    SANDBOX_CONDITION_SINCE,
    KubeletTimings,
    PodState,
    minor_version,
)
from handoff.sim.components.kubelet.static import StaticPods
from handoff.sim.components.kubelet.status import KUBELET_CONDITIONS, StatusManager
from handoff.sim.objects import (
    Obj,
    node_ip,
    pod_requests,
)


class Kubelet(NodeStatus, Admission, Eviction, PodWorkers, StatusManager, StaticPods):
    """One node's kubelet. ``state`` is running, hung (heartbeats only), stopped or dead."""

    def __init__(
        self,
        api: APIServer,
        node: Obj,
        timings: KubeletTimings | None = None,
        static_pods: list[Obj] | None = None,
        preloaded_images: tuple[str, ...] = (),
    ) -> None:
        self.api = api
        self.loop = api.loop
        self.t = timings or KubeletTimings()
        self.name = node["metadata"]["name"]
        self.node_template = node
        self.ip = node_ip(node)
        self.host_ips = [{"ip": self.ip}]  # shared by every status it writes
        self.state = "running"
        self.recorder = CoreRecorder(api, "kubelet", self.name)
        self.pods: dict[str, PodState] = {}
        self.used_cpu = self.used_mem = self.used_pods = 0
        self.images: set[str] = set(preloaded_images)
        self.frozen: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self.static: dict[str, Obj] = {}
        self.static_states: dict[str, PodState] = {}
        self.mirrors: dict[str, str] = {}  # mirror name -> static uid
        self.last_report = 0.0
        # Ready=False with this message while set (a broken CNI, runtime or PLEG).
        self.not_ready: str | None = None
        # Hard memory eviction threshold crossed: pods left to evict before it clears, and
        # until when MemoryPressure stays True (evictionPressureTransitionPeriod, 5 min).
        self.memory_pressure = 0
        self.pressure_until = 0.0
        self._in_order: tuple[Obj | None, tuple[str | None, bool]] = (None, (None, False))
        self.die_on_pickup = False
        self._delivered = 0.0
        self._admitted_at = 0.0
        self.ip_seq = 1
        self.ip_prefix = node["spec"]["podCIDR"].rsplit(".", 1)[0] + "."
        self.version = minor_version(node["status"]["nodeInfo"]["kubeletVersion"])
        self.condition_types = (
            KUBELET_CONDITIONS
            if self.version >= SANDBOX_CONDITION_SINCE
            else KUBELET_CONDITIONS[1:]
        )
        self.sub = api.subscribe("pods", self._deliver, node_name=self.name)
        for manifest in static_pods or ():
            self.static[manifest["metadata"]["name"]] = manifest

    def stop(self) -> None:
        self.state = "stopped"

    def die(self) -> None:
        self.state = "dead"
        self.api.unsubscribe(self.sub)

    def resume(self) -> None:
        """Back from hung, stopped or NotReady: replay what waited and relist its pods."""
        if self.state == "dead":
            return
        self.state = "running"
        self.not_ready = None
        frozen, self.frozen = self.frozen, []
        for fn, args in frozen:
            fn(*args)
        # The relist: what was missed while down is reconciled against the API.
        current = {p["metadata"]["uid"]: p for p in self.api.pods_on(self.name)}
        for uid, ps in list(self.pods.items()):
            if uid not in current:
                self._forget(ps)
        for uid, pod in current.items():
            ps = self.pods.get(uid)
            if ps is None:
                self._on_pod("ADDED", pod)
            elif pod["metadata"].get("deletionTimestamp") and not ps.terminating:
                ps.pod = pod
                self._terminate(ps)
        self._node_status_tick()

    def _step(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run a pod-worker step unless the kubelet is hung (deferred) or down (dropped)."""
        if self.state == "running":
            fn(*args)
        elif self.state == "hung":
            self.frozen.append((fn, args))

    def _later(
        self, delay: tuple[float, float] | float, fn: Callable[..., Any], *args: Any
    ) -> None:
        loop = self.loop
        if delay.__class__ is tuple:
            lo, hi = delay  # type: ignore[misc]
            delay = lo + (hi - lo) * loop._random()  # loop.uniform(delay), inlined
        loop.call_at(loop.now + delay, self._step, fn, *args)  # type: ignore[operator]

    def _deliver(self, type_: str, pod: Obj) -> None:
        ps = self.pods.get(pod["metadata"]["uid"])
        if ps is not None:
            if ps.pod is pod:
                return  # an adopted pod's own ADDED: nothing new to learn
            if type_ == "MODIFIED" and (
                ps.terminating or not pod["metadata"].get("deletionTimestamp")
            ):
                return  # its own status writes coming back: the pod worker already knows
        # One watch stream: events arrive in resourceVersion order, whatever their latency.
        loop = self.loop
        lo, hi = self.t.watch
        when = loop.now + (lo + (hi - lo) * loop._random())  # loop.uniform(self.t.watch)
        if when < self._delivered:
            when = self._delivered
        self._delivered = when
        loop.call_at(when, self._step, self._on_pod, type_, pod)

    def _on_pod(self, type_: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        ann = meta.get("annotations") or {}
        if "kubernetes.io/config.mirror" in ann:
            self._on_mirror(type_, pod)
            return
        ps = self.pods.get(uid)
        if type_ == "DELETED":
            if ps is not None:
                self._forget(ps)
            return
        if ps is None:
            if self.die_on_pickup:
                self.die()
                return
            if pod["status"].get("phase") in ("Succeeded", "Failed"):
                return
            if meta.get("deletionTimestamp"):
                self._delete_now(pod)
                return
            ps = PodState(pod, uid)
            self.pods[uid] = ps
            # HandlePodAdditions admits one pod after another, in arrival order.
            when = max(self._admitted_at, self.loop.now + self.loop.uniform(self.t.admit))
            self._admitted_at = when
            self.loop.call_at(when, self._step, self._admit, ps)
            return
        ps.pod = pod
        if meta.get("deletionTimestamp") and not ps.terminating:
            self._terminate(ps)

    def _delete_now(self, pod: Obj) -> None:
        meta = pod["metadata"]
        try:  # noqa: SIM105 (contextlib.suppress costs three calls; this runs per pod)
            self.api.delete("pods", meta["namespace"], meta["name"], grace=0)
        except ApiError:
            pass

    def adopt(self, pod: Obj) -> None:
        """Take over a pod that was already running before the simulation started."""
        status = pod["status"]
        ps = PodState(pod, pod["metadata"]["uid"], phase=status.get("phase", "Running"))
        ps.cpu, ps.mem = pod_requests(pod)
        ps.start_time = self.loop.now
        ps.sandbox = True
        ps.pod_ip = status.get("podIP", "")
        ps.app = [dict(c) for c in status.get("containerStatuses") or ()]
        ps.ready = all(c.get("ready") for c in ps.app)
        self.pods[ps.uid] = ps
        self.used_cpu += ps.cpu
        self.used_mem += ps.mem
        self.used_pods += 1
