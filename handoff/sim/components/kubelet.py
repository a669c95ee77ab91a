"""The kubelet of one node: pod watch, admission, pod workers, status manager, heartbeats,
static pods and their mirror pods.

A kubelet counts only the pods it has admitted (pkg/kubelet/lifecycle/predicate.go); the
scheduler counts what it has bound or assumed. The two views can disagree, which is how a
pod the scheduler placed gets rejected with OutOfcpu ("node state changed since the
scheduler's decision").
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from handoff.sim.components.apiserver import ApiError, APIServer, owner_ref, set_condition
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import (
    Obj,
    cpu_millis,
    edit,
    go_duration,
    host_ports,
    matches_node,
    mem_bytes,
    node_ip,
    pod_requests,
    ports_conflict,
    stamp,
    untolerated,
)

KUBELET_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)
# (status, reason, message) of the pod conditions build_status writes most.
_CONDITION_TRUE: tuple[str, str | None, str | None] = ("True", None, None)
_SANDBOX_TRUE = _CONDITION_TRUE
_SANDBOX_FALSE: tuple[str, str | None, str | None] = ("False", None, None)
BAD_IMAGE_MARKERS = ("doesnotexist", "does-not-exist", "nonexistent", ":typo")


@dataclass
class KubeletTimings:
    watch: tuple[float, float] = (0.002, 0.020)
    admit: tuple[float, float] = (0.005, 0.040)
    status: tuple[float, float] = (0.020, 0.200)
    sandbox: tuple[float, float] = (0.3, 1.5)
    pull: tuple[float, float] = (0.8, 4.0)
    create: tuple[float, float] = (0.05, 0.3)
    start: tuple[float, float] = (0.02, 0.2)
    ready: tuple[float, float] = (0.0, 2.0)
    init_run: tuple[float, float] = (0.5, 3.0)
    pleg: tuple[float, float] = (0.05, 1.0)  # generic PLEG relists every second
    kill: tuple[float, float] = (0.3, 2.5)
    image_size: tuple[int, int] = (5_000_000, 250_000_000)
    node_status_frequency: float = 10.0
    node_status_report: float = 300.0
    lease_renew: float = 10.0
    mirror_recreate: tuple[float, float] = (0.5, 4.0)
    file_check: float = 20.0
    backoff_initial: float = 10.0
    backoff_max: float = 300.0


@dataclass
class Behaviour:
    """How a workload's containers behave, read from pod annotations the scenarios set.

    ``sim.handoff/run-seconds``: containers exit after this long (exit code 0 unless
    ``sim.handoff/exit-code``); ``sim.handoff/crash``: exit 1 every time (crash loop).
    """

    run_for: float | None = None
    exit_code: int = 0

    @staticmethod
    def of(pod: Obj) -> Behaviour:
        ann = pod["metadata"].get("annotations") or {}
        if ann.get("sim.handoff/crash"):
            return Behaviour(float(ann["sim.handoff/crash"]), 1)
        run = ann.get("sim.handoff/run-seconds")
        if run is None:
            return PLAIN
        return Behaviour(float(run), int(ann.get("sim.handoff/exit-code", "0")))


PLAIN = Behaviour()  # never mutated: shared by every pod without behaviour annotations


def _plain() -> Behaviour:
    return PLAIN


@dataclass(slots=True)
class PodState:
    pod: Obj
    uid: str
    cpu: int = 0
    mem: int = 0
    static: bool = False
    phase: str = "Pending"
    start_time: float = 0.0
    sandbox: bool = False
    pod_ip: str = ""
    init: list[Obj] = field(default_factory=list)
    app: list[Obj] = field(default_factory=list)
    ready: bool = False
    terminating: bool = False
    done: bool = False
    status_pending: bool = False
    behaviour: Behaviour = field(default_factory=_plain)
    pull_backoff: float = 0.0
    crash_backoff: float = 0.0
    generation: int = 0
    released: bool = False
    seen: float = 0.0


def _container_state(name: str, image: str) -> Obj:
    return {
        "name": name,
        "state": {"waiting": {"reason": "ContainerCreating"}},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": image,
        "imageID": "",
        "started": False,
    }


class Kubelet:
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
        self.sub = api.subscribe("pods", self._deliver, node_name=self.name)
        for manifest in static_pods or ():
            self.static[manifest["metadata"]["name"]] = manifest

    # --- lifecycle of the kubelet itself ---------------------------------------------------

    def register(self) -> None:
        """Create the Node (as kubelet registration does), start heartbeats and static pods."""
        now = self.loop.now
        node = edit(self.node_template, "status")
        node["status"]["conditions"] = self._node_conditions(now, None)
        self.api.create("nodes", node)
        self.last_report = now
        self.api.leases[self.name] = now
        self.loop.every(
            self.t.node_status_frequency,
            self._node_status_tick,
            first=self.loop.uniform((0.5, self.t.node_status_frequency)),
        )
        self.loop.every(self.t.lease_renew, self._renew_lease)
        for name in list(self.static):
            self._start_static(name)

    def _alive(self) -> bool:
        return self.state in ("running", "hung")

    def _renew_lease(self) -> bool:
        if self.state == "dead":
            return False
        if self._alive():
            self.api.leases[self.name] = self.loop.now
        return True

    def _node_conditions(self, now: float, old: list[Obj] | None) -> list[Obj]:
        """The kubelet's node condition setters (pkg/kubelet/nodestatus/setters.go)."""
        memory = (
            (
                "MemoryPressure",
                "True",
                "KubeletHasInsufficientMemory",
                "kubelet has insufficient memory available",
            )
            if self._under_pressure()
            else (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            )
        )
        ready = (
            ("Ready", "False", "KubeletNotReady", self.not_ready)
            if self.not_ready
            else ("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        )
        spec = [
            memory,
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            ready,
        ]
        previous = {c["type"]: c for c in old or ()}
        out = []
        for type_, status, reason, message in spec:
            prev = previous.get(type_)
            transition = stamp(now)
            if prev is not None and prev["status"] == status:
                transition = prev["lastTransitionTime"]
            elif prev is not None and type_ in NODE_STATUS_EVENTS:
                # recordNodeStatusEvent: the kubelet's own event on its Node.
                event = NODE_STATUS_EVENTS[type_][status == "True"]
                self.node_event(event, f"Node {self.name} status is now: {event}")
            out.append(
                {
                    "type": type_,
                    "status": status,
                    "lastHeartbeatTime": stamp(now),
                    "lastTransitionTime": transition,
                    "reason": reason,
                    "message": message,
                }
            )
        return out

    def node_event(self, reason: str, message: str) -> None:
        ref = {"kind": "Node", "name": self.name, "uid": self.name, "apiVersion": "v1"}
        self.recorder.event_ref(ref, "Normal", reason, message)

    def _wanted(self, type_: str) -> str:
        if type_ == "Ready":
            return "False" if self.not_ready else "True"
        if type_ == "MemoryPressure" and self._under_pressure():
            return "True"
        return "False"

    def _under_pressure(self) -> bool:
        return bool(self.memory_pressure) or self.loop.now < self.pressure_until

    def _node_status_tick(self) -> bool:
        """Every 10 s: post status if it changed, or every 5 minutes regardless."""
        if self.state == "dead":
            return False
        if not self._alive():
            return True
        node = self.api.find("nodes", "", self.name)
        if node is None:
            return True
        now = self.loop.now
        old = node["status"].get("conditions") or []
        # Most ticks see the Node it last found in order: skip comparing it again.
        wanted = (self.not_ready, self._under_pressure())
        if node is self._in_order[0] and wanted == self._in_order[1]:
            changed = False
        else:
            changed = any(c["status"] != self._wanted(c["type"]) for c in old)
            if not changed:
                self._in_order = (node, wanted)
        if changed or now - self.last_report >= self.t.node_status_report:
            new = edit(node, "status")
            new["status"]["conditions"] = self._node_conditions(now, old)
            self.api.update("nodes", new)
            self.last_report = now
        return True

    def hang(self) -> None:
        self.state = "hung"

    def report_not_ready(self, message: str | None = None) -> None:
        """The kubelet runs but reports Ready=False (posted at its next status tick)."""
        self.not_ready = message or NOT_READY_MESSAGE

    def report_ready(self) -> None:
        self.not_ready = None

    def press_memory(self, evictions: int = 1) -> None:
        """memory.available falls under the hard threshold (100Mi) until ``evictions`` pods
        have been evicted; the eviction manager acts every 10 s (housekeeping), and the node
        reports MemoryPressure until 5 minutes after the last eviction."""
        if not self.memory_pressure:
            self.loop.call_later(self.loop.uniform((0.0, EVICTION_PERIOD)), self._eviction_tick)
        self.memory_pressure = max(self.memory_pressure, evictions)

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

    # --- pod watch -------------------------------------------------------------------------

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

    # --- admission -------------------------------------------------------------------------

    def _admit(self, ps: PodState) -> None:
        pod = self.api.find("pods", ps.pod["metadata"]["namespace"], ps.pod["metadata"]["name"])
        if pod is None or pod["metadata"]["uid"] != ps.uid:
            self.pods.pop(ps.uid, None)
            return
        ps.pod = pod
        if pod["metadata"].get("deletionTimestamp"):
            self.pods.pop(ps.uid, None)
            self._delete_now(pod)
            return
        rejection = self.admission_failure(pod)
        if rejection is not None:
            self._reject(ps, *rejection)
            return
        ps.cpu, ps.mem = pod_requests(pod)
        self.used_cpu += ps.cpu
        self.used_mem += ps.mem
        self.used_pods += 1
        self._run(ps)

    def admission_failure(self, pod: Obj, static: bool = False) -> tuple[str, str] | None:
        """(reason, message) of the first failing admission check, in kubelet order."""
        node = self.api.find("nodes", "", self.name)
        if node is None:
            return "InvalidNodeInfo", "Kubelet cannot get node info."
        alloc = node["status"].get("allocatable") or {}
        cpu, mem = pod_requests(pod)
        pods_cap, cap_cpu, cap_mem = _capacity(alloc)
        if self.used_pods + 1 > pods_cap:
            return "OutOfpods", _insufficient("pods", 1, self.used_pods, pods_cap)
        if cpu and cpu > cap_cpu - self.used_cpu:
            return "OutOfcpu", _insufficient("cpu", cpu, self.used_cpu, cap_cpu)
        if mem and mem > cap_mem - self.used_mem:
            return "OutOfmemory", _insufficient("memory", mem, self.used_mem, cap_mem)
        if not matches_node(pod["spec"], node):
            return (
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            )
        if pod["spec"].get("nodeName") not in (None, "", self.name):
            return (
                "NodeName",
                "Predicate NodeName failed: node(s) didn't match the requested node name",
            )
        wanted = host_ports(pod)
        if wanted and ports_conflict(wanted, self._ports_in_use()):
            return (
                "NodePorts",
                "Predicate NodePorts failed: node(s) didn't have free ports for the requested "
                "pod ports",
            )
        if not static:
            taints = node["spec"].get("taints") or []
            if untolerated(taints, pod["spec"].get("tolerations") or [], ("NoExecute",)):
                return (
                    "TaintToleration",
                    "Predicate TaintToleration failed: node(s) had taints that the pod didn't "
                    "tolerate",
                )
        return None

    def _ports_in_use(self) -> set[tuple[str, str, int]]:
        used: set[tuple[str, str, int]] = set()
        for ps in [*self.pods.values(), *self.static_states.values()]:
            if ps.start_time and not ps.released:
                used.update(host_ports(ps.pod))
        return used

    # --- node-pressure eviction (pkg/kubelet/eviction) -------------------------------------

    def _eviction_tick(self) -> None:
        if self.state == "dead" or not self.memory_pressure:
            return
        if self.state == "running":
            victim = self._eviction_victim()
            if victim is not None:
                self._evict(victim)
                self.memory_pressure -= 1
        if self.memory_pressure:
            self.loop.call_later(EVICTION_PERIOD, self._eviction_tick)
        else:
            self.pressure_until = self.loop.now + PRESSURE_TRANSITION

    def _eviction_victim(self) -> PodState | None:
        """rankMemoryPressure: BestEffort, then Burstable, then Guaranteed; static pods are
        critical and never evicted. Among equals, the largest request goes first."""
        order = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
        running = [
            ps
            for ps in self.pods.values()
            if ps.start_time and not ps.done and not ps.terminating and not ps.static
        ]
        if not running:
            return None
        return min(
            running,
            key=lambda ps: (order.get(ps.pod["status"].get("qosClass", "BestEffort"), 0), -ps.mem),
        )

    def _evict(self, ps: PodState) -> None:
        """evictPod: Warning Evicted, then the pod is killed at once (hard threshold, grace
        0) and left in the API as Failed/Evicted with DisruptionTarget TerminationByKubelet."""
        message = _eviction_message(ps)
        self.recorder.event(ps.pod, "Warning", "Evicted", message)
        ps.terminating = True
        now = self.loop.now
        for c in ps.app:
            running = c["state"].get("running")
            terminated: Obj = {"exitCode": 137, "reason": "Error"}
            if running is not None:
                terminated["startedAt"] = running["startedAt"]
            terminated["finishedAt"] = stamp(now)
            if c.get("containerID"):
                terminated["containerID"] = c["containerID"]
            c["state"] = {"terminated": terminated}
            c["ready"] = False
            c["started"] = False
        ps.ready = False
        ps.phase = "Failed"
        ps.done = True
        self._release(ps)
        pod = self.api.find("pods", ps.pod["metadata"]["namespace"], ps.pod["metadata"]["name"])
        if pod is None or pod["metadata"]["uid"] != ps.uid:
            return
        new = edit(pod, "status")
        status = self.build_status(ps, pod["status"])
        status["message"] = message
        status["reason"] = "Evicted"
        set_condition(status, "DisruptionTarget", "True", now, "TerminationByKubelet", message)
        new["status"] = status
        self._write(new)

    def _reject(self, ps: PodState, reason: str, message: str) -> None:
        """kubelet.rejectPod: Failed with reason and prefixed message; event without prefix."""
        ps.done = True
        pod = ps.pod
        self.recorder.event(pod, "Warning", reason, message)
        new = edit(pod, "status")
        new["status"] = {
            "phase": "Failed",
            "message": f"Pod was rejected: {message}",
            "reason": reason,
            "startTime": stamp(self.loop.now),
            "qosClass": pod["status"].get("qosClass", "BestEffort"),
        }
        self._write(new)

    # --- pod worker ------------------------------------------------------------------------

    def _run(self, ps: PodState) -> None:
        pod = ps.pod
        spec = pod["spec"]
        ps.start_time = self.loop.now
        ps.behaviour = Behaviour.of(pod)
        waiting = "PodInitializing" if spec.get("initContainers") else "ContainerCreating"
        ps.init = [_container_state(c["name"], c["image"]) for c in spec.get("initContainers", ())]
        for c in ps.init:
            c["state"] = {"waiting": {"reason": "PodInitializing"}}
        ps.app = [_container_state(c["name"], c["image"]) for c in spec["containers"]]
        for c in ps.app:
            c["state"] = {"waiting": {"reason": waiting}}
        self._status_soon(ps)
        self._later(self.t.sandbox, self._sandbox_ready, ps)

    def _sandbox_ready(self, ps: PodState) -> None:
        if ps.terminating or ps.done:
            return
        ps.sandbox = True
        ps.pod_ip = self._next_ip()
        # No status write here: the pod worker is still inside this syncPod (pulling,
        # starting); the next write comes when PLEG reports the containers started.
        self._next_container(ps)

    def _next_ip(self) -> str:
        self.ip_seq += 1
        return f"{self.ip_prefix}{self.ip_seq % 250 + 2}"

    def _next_container(self, ps: PodState) -> None:
        """Start the next init container, or every app container once init is done."""
        spec = ps.pod["spec"]
        for i, c in enumerate(ps.init):
            if "terminated" not in c["state"]:
                self._pull(ps, spec["initContainers"][i], c, "initContainers", i)
                return
        for i, c in enumerate(ps.app):
            if "running" not in c["state"] and "terminated" not in c["state"]:
                self._pull(ps, spec["containers"][i], c, "containers", i)

    def _pull(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        policy = spec_c.get("imagePullPolicy", "IfNotPresent")
        if image in self.images and policy != "Always":
            self.recorder.event(
                ps.pod,
                "Normal",
                "Pulled",
                f'Container image "{image}" already present on machine',
                path,
            )
            self._later(self.t.create, self._create, ps, spec_c, c, group, i)
            return
        self.recorder.event(ps.pod, "Normal", "Pulling", f'Pulling image "{image}"', path)
        took = self.loop.uniform(self.t.pull)
        self._later(took, self._pulled, ps, spec_c, c, group, i, took)

    def _pulled(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int, took: float) -> None:
        if ps.terminating or ps.done:
            return
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        if any(marker in image for marker in BAD_IMAGE_MARKERS):
            self._pull_failed(ps, spec_c, c, group, i)
            return
        self.images.add(image)
        size = int(self.loop.uniform(self.t.image_size))
        d = go_duration(took)
        self.recorder.event(
            ps.pod,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image}" in {d} ({d} including waiting). '
            f"Image size: {size} bytes.",
            path,
        )
        self._later(self.t.create, self._create, ps, spec_c, c, group, i)

    def _pull_failed(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        ref = image if "/" in image else f"docker.io/library/{image}"
        self.recorder.event(
            ps.pod,
            "Warning",
            "Failed",
            f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull '
            f'and unpack image "{ref}": failed to resolve reference "{ref}": {ref}: not found',
            path,
        )
        self.recorder.event(ps.pod, "Warning", "Failed", "Error: ErrImagePull", path)
        c["state"] = {"waiting": {"reason": "ErrImagePull", "message": f"failed to pull {image}"}}
        self._status_soon(ps)
        ps.pull_backoff = min(max(ps.pull_backoff * 2, self.t.backoff_initial), self.t.backoff_max)
        self._later(1.0, self._pull_backoff, ps, spec_c, c, group, i)

    def _pull_backoff(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        if ps.terminating or ps.done:
            return
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        self.recorder.event(ps.pod, "Normal", "BackOff", f'Back-off pulling image "{image}"', path)
        self.recorder.event(ps.pod, "Warning", "Failed", "Error: ImagePullBackOff", path)
        c["state"] = {
            "waiting": {
                "reason": "ImagePullBackOff",
                "message": f'Back-off pulling image "{image}"',
            }
        }
        self._status_soon(ps)
        self._later(ps.pull_backoff, self._pull, ps, spec_c, c, group, i)

    def _create(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        if ps.terminating or ps.done:
            return
        path = f"spec.{group}{{{spec_c['name']}}}"
        self.recorder.event(
            ps.pod, "Normal", "Created", f"Created container: {spec_c['name']}", path
        )
        self._later(self.t.start, self._started, ps, spec_c, c, group, i)

    def _started(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        if ps.terminating or ps.done:
            return
        path = f"spec.{group}{{{spec_c['name']}}}"
        self.recorder.event(
            ps.pod, "Normal", "Started", f"Started container {spec_c['name']}", path
        )
        now = self.loop.now
        c["state"] = {"running": {"startedAt": stamp(now)}}
        c["started"] = True
        c["containerID"] = f"containerd://{ps.uid.replace('-', '')}{i:02d}{c['restartCount']:04d}"
        c["imageID"] = image_id(spec_c["image"])
        if group == "initContainers":
            self._later(self.t.init_run, self._init_done, ps, c)
            self._status_soon(ps, self.t.pleg)
            return
        # Without a readiness probe a started container is ready at once.
        c["ready"] = "readinessProbe" not in spec_c
        if all("running" in x["state"] for x in ps.app):
            ps.phase = "Running"
            ps.ready = all(x["ready"] for x in ps.app)
            if not ps.ready:
                self._later(self.t.ready, self._ready, ps)
        gen = ps.generation
        if ps.behaviour.run_for is not None:
            self._later(ps.behaviour.run_for, self._exited, ps, spec_c, c, i, gen)
        self._status_soon(ps, self.t.pleg)

    def _init_done(self, ps: PodState, c: Obj) -> None:
        if ps.terminating or ps.done:
            return
        started = c["state"].get("running", {}).get("startedAt", stamp(self.loop.now))
        c["state"] = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": stamp(self.loop.now),
                "containerID": c.get("containerID", ""),
            }
        }
        c["started"] = False
        c["ready"] = True
        self._status_soon(ps, self.t.pleg)
        self._next_container(ps)

    def _ready(self, ps: PodState) -> None:
        if ps.terminating or ps.done or ps.phase != "Running":
            return
        for c in ps.app:
            if "running" in c["state"]:
                c["ready"] = True
        ps.ready = all(c["ready"] for c in ps.app)
        self._status_soon(ps)

    def _exited(self, ps: PodState, spec_c: Obj, c: Obj, i: int, gen: int) -> None:
        if ps.terminating or ps.done or gen != ps.generation:
            return
        code = ps.behaviour.exit_code
        now = self.loop.now
        started = c["state"].get("running", {}).get("startedAt", stamp(now))
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": started,
            "finishedAt": stamp(now),
            "containerID": c.get("containerID", ""),
        }
        c["ready"] = False
        c["started"] = False
        ps.ready = False
        policy = ps.pod["spec"].get("restartPolicy", "Always")
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            c["state"] = {"terminated": terminated}
            if all("terminated" in x["state"] for x in ps.app):
                codes = [x["state"]["terminated"]["exitCode"] for x in ps.app]
                ps.phase = "Succeeded" if all(x == 0 for x in codes) else "Failed"
                ps.done = True
                self._release(ps)
            self._status_soon(ps, self.t.pleg)
            return
        c["lastState"] = {"terminated": terminated}
        c["restartCount"] += 1
        ps.crash_backoff = min(
            max(ps.crash_backoff * 2, self.t.backoff_initial), self.t.backoff_max
        )
        name = spec_c["name"]
        meta = ps.pod["metadata"]
        message = (
            f"back-off {go_duration(ps.crash_backoff)} restarting failed container={name} "
            f"pod={meta['name']}_{meta['namespace']}({ps.uid})"
        )
        c["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        self.recorder.event(
            ps.pod,
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {name} in pod "
            f"{meta['name']}_{meta['namespace']}({ps.uid})",
            f"spec.containers{{{name}}}",
        )
        self._status_soon(ps, self.t.pleg)
        self._later(ps.crash_backoff, self._restart, ps, spec_c, c, i)

    def _restart(self, ps: PodState, spec_c: Obj, c: Obj, i: int) -> None:
        if ps.terminating or ps.done:
            return
        ps.generation += 1
        self._pull(ps, spec_c, c, "containers", i)

    # --- termination -----------------------------------------------------------------------

    def _terminate(self, ps: PodState) -> None:
        ps.terminating = True
        if ps.done or not ps.sandbox:
            self._finish(ps)
            return
        for i, c in enumerate(ps.app):
            if "running" in c["state"]:
                name = ps.pod["spec"]["containers"][i]["name"]
                self.recorder.event(
                    ps.pod,
                    "Normal",
                    "Killing",
                    f"Stopping container {name}",
                    f"spec.containers{{{name}}}",
                )
        grace = ps.pod["metadata"].get("deletionGracePeriodSeconds", 30)
        self._later(min(self.loop.uniform(self.t.kill), float(grace)), self._killed, ps)

    def _killed(self, ps: PodState) -> None:
        now = self.loop.now
        for c in ps.app:
            running = c["state"].get("running")
            if running is not None:
                c["state"] = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": running["startedAt"],
                        "finishedAt": stamp(now),
                        "containerID": c.get("containerID", ""),
                    }
                }
            elif "terminated" not in c["state"]:
                c["state"] = {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "ContainerStatusUnknown",
                        "finishedAt": stamp(now),
                    }
                }
            c["ready"] = False
            c["started"] = False
        ps.ready = False
        codes = [c["state"]["terminated"].get("exitCode", 0) for c in ps.app]
        ps.phase = "Succeeded" if all(x == 0 for x in codes) else "Failed"
        self._write_status(ps)
        self._finish(ps)

    def _finish(self, ps: PodState) -> None:
        """Containers are gone: release the pod's resources and delete it with grace 0."""
        self._release(ps)
        ps.done = True
        pod = self.api.find("pods", ps.pod["metadata"]["namespace"], ps.pod["metadata"]["name"])
        if pod is not None and pod["metadata"]["uid"] == ps.uid:
            self._delete_now(pod)

    def _release(self, ps: PodState) -> None:
        """Give back what admission counted, once."""
        if ps.released or not ps.start_time:
            return
        ps.released = True
        self.used_cpu -= ps.cpu
        self.used_mem -= ps.mem
        self.used_pods -= 1

    def _forget(self, ps: PodState) -> None:
        if not ps.done and ps.start_time:
            self._release(ps)
        ps.done = True
        ps.terminating = True
        self.pods.pop(ps.uid, None)

    # --- status manager --------------------------------------------------------------------

    def _status_soon(self, ps: PodState, delay: tuple[float, float] | None = None) -> None:
        """The status manager batches: one write soon, carrying the state at write time.

        Container state changes reach it through PLEG's relist (``t.pleg``), the rest after
        ``t.status``.
        """
        if ps.status_pending:
            return
        ps.status_pending = True
        self._later(delay or self.t.status, self._write_status, ps)

    def _write_status(self, ps: PodState) -> None:
        ps.status_pending = False
        if ps.static:
            self._write_mirror_status(ps)
            return
        meta = ps.pod["metadata"]
        pod = self.api.find("pods", meta["namespace"], meta["name"])
        if pod is None or pod["metadata"]["uid"] != ps.uid:
            return
        status = self.build_status(ps, pod["status"])
        if status != pod["status"]:
            self._write({**pod, "status": status})

    def _write(self, new: Obj) -> None:
        try:  # noqa: SIM105 (contextlib.suppress costs three calls; per status write)
            self.api.update("pods", new)
        except ApiError:
            pass

    def build_status(self, ps: PodState, old: Obj) -> Obj:
        """generateAPIPodStatus: conditions in kubelet order, container statuses.

        Runs for every status write: no comprehensions (each is a call) and the
        ``containers with … status`` messages are only formatted when they are needed.
        """
        now = self.loop.now
        done = ps.phase in ("Succeeded", "Failed")
        initialized: tuple[str, str | None, str | None] = _CONDITION_TRUE
        if ps.init:
            init_pending = [c["name"] for c in ps.init if "terminated" not in c["state"]]
            if init_pending:
                initialized = (
                    "False",
                    "ContainersNotInitialized",
                    f"containers with incomplete status: [{' '.join(init_pending)}]",
                )
        if ps.ready:
            ready: tuple[str, str | None, str | None] = _CONDITION_TRUE
        elif done:
            ready = ("False", "PodCompleted", None)
        else:
            unready = [c["name"] for c in ps.app if not c["ready"]] or [c["name"] for c in ps.app]
            ready = (
                "False",
                "ContainersNotReady",
                f"containers with unready status: [{' '.join(unready)}]",
            )
        # In KUBELET_CONDITIONS order: PodReadyToStartContainers, Initialized, Ready,
        # ContainersReady, PodScheduled.
        values = (
            _SANDBOX_TRUE if ps.sandbox and not done else _SANDBOX_FALSE,
            initialized,
            ready,
            ready,
            _CONDITION_TRUE,
        )
        previous: dict[str, Obj] = {}
        for c in old.get("conditions") or ():
            previous[c["type"]] = c
        conditions = []
        found = 0
        for type_, (value, reason, message) in zip(KUBELET_CONDITIONS, values, strict=True):
            prev = previous.get(type_)
            if prev is not None:
                found += 1
                if (
                    prev["status"] == value
                    and prev.get("reason") == reason
                    and prev.get("message") == message
                    and len(prev) == 4 + (reason is not None) + (message is not None)
                    and "lastProbeTime" in prev
                    and prev["lastProbeTime"] is None
                ):
                    conditions.append(prev)  # unchanged: share it (stored objects are immutable)
                    continue
            cond: Obj = {"type": type_, "status": value, "lastProbeTime": None}
            if prev is not None and prev["status"] == value:
                cond["lastTransitionTime"] = prev.get("lastTransitionTime")
            else:
                cond["lastTransitionTime"] = stamp(now)
            if reason:
                cond["reason"] = reason
            if message:
                cond["message"] = message
            conditions.append(cond)
        if len(previous) > found:
            for type_, prev in previous.items():
                if type_ not in KUBELET_CONDITIONS:
                    conditions.append(prev)
        status: Obj = {
            "phase": ps.phase,
            "conditions": conditions,
            "hostIP": self.ip,
            "hostIPs": self.host_ips,
        }
        if ps.pod_ip:
            status["podIP"] = ps.pod_ip
            status["podIPs"] = [{"ip": ps.pod_ip}]
        status["startTime"] = stamp(ps.start_time)
        if ps.init:
            status["initContainerStatuses"] = list(map(dict, ps.init))
        status["containerStatuses"] = list(map(dict, ps.app))
        status["qosClass"] = old.get("qosClass", "BestEffort")
        return status

    # --- static pods -----------------------------------------------------------------------

    def _static_uid(self, manifest: Obj) -> str:
        digest = hashlib.md5(
            orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS) + self.name.encode()
        )
        return digest.hexdigest()

    def _start_static(self, name: str) -> None:
        manifest = self.static[name]
        uid = self._static_uid(manifest)
        spec = dict(manifest["spec"])
        spec["nodeName"] = self.name
        meta = dict(manifest["metadata"])
        meta["name"] = f"{name}-{self.name}"
        meta.setdefault("namespace", "kube-system")
        meta["uid"] = uid
        meta["creationTimestamp"] = stamp(self.loop.now)
        static_pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": meta,
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        ps = PodState(static_pod, uid, static=True)
        ps.cpu, ps.mem = pod_requests(static_pod)
        self.used_cpu += ps.cpu
        self.used_mem += ps.mem
        self.used_pods += 1
        self.static_states[meta["name"]] = ps
        ps.seen = self.loop.now
        self._create_mirror(ps)
        self._run(ps)

    def _create_mirror(self, ps: PodState) -> None:
        if not self._alive():
            return
        meta = ps.pod["metadata"]
        node = self.api.find("nodes", "", self.name)
        if node is None:
            return
        seen = ps.seen
        annotations = dict(meta.get("annotations") or {})
        annotations.update(
            {
                "kubernetes.io/config.hash": ps.uid,
                "kubernetes.io/config.mirror": ps.uid,
                "kubernetes.io/config.seen": _nano(seen),
                "kubernetes.io/config.source": "file",
            }
        )
        mirror = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [owner_ref(node, controller=True, block=False)],
            },
            "spec": ps.pod["spec"],
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        try:
            created = self.api.create("pods", mirror)
        except ApiError:
            return
        self.mirrors[meta["name"]] = created["metadata"]["uid"]
        if ps.start_time:
            self._status_soon(ps)

    def _on_mirror(self, type_: str, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        ps = self.static_states.get(name)
        if ps is None:
            if type_ != "DELETED":
                self._delete_now(pod)  # an orphaned mirror pod: no manifest backs it
            return
        if type_ != "DELETED" and pod["metadata"].get("deletionTimestamp"):
            self._delete_now(pod)  # a deleted mirror pod goes at once; the file still rules
            return
        if type_ == "DELETED" and self.mirrors.get(name) == pod["metadata"]["uid"]:
            self.mirrors.pop(name, None)
            if name in self.static_states:
                self._later(self.t.mirror_recreate, self._create_mirror, ps)

    def _write_mirror_status(self, ps: PodState) -> None:
        meta = ps.pod["metadata"]
        mirror = self.api.find("pods", meta["namespace"], meta["name"])
        if mirror is None or mirror["metadata"]["uid"] != self.mirrors.get(meta["name"]):
            return
        new = edit(mirror, "status")
        new["status"] = self.build_status(ps, mirror["status"])
        if new["status"] != mirror["status"]:
            self._write(new)

    def remove_static(self, name: str) -> None:
        """The manifest file is deleted: noticed at the next file check, then torn down."""
        self.static.pop(name, None)
        full = f"{name}-{self.name}"
        self._later(self.loop.uniform((0.0, self.t.file_check)), self._stop_static, full)

    def _stop_static(self, full: str) -> None:
        ps = self.static_states.pop(full, None)
        if ps is None:
            return
        ps.terminating = True
        for c in ps.pod["spec"]["containers"]:
            self.recorder.event(
                ps.pod,
                "Normal",
                "Killing",
                f"Stopping container {c['name']}",
                f"spec.containers{{{c['name']}}}",
            )
        self._release(ps)
        mirror = self.api.find("pods", ps.pod["metadata"]["namespace"], full)
        if mirror is not None:
            self._later(self.loop.uniform((20.0, 30.0)), self._delete_now, mirror)


_image_ids: dict[str, str] = {}


def image_id(image: str) -> str:
    """A stable digest reference for an image, as containerd reports it."""
    found = _image_ids.get(image)
    if found is None:
        digest = hashlib.sha256(image.encode()).hexdigest()
        found = _image_ids[image] = f"{image.split(':')[0]}@sha256:{digest}"
    return found


def _insufficient(resource: str, requested: int, used: int, capacity: int) -> str:
    return (
        f"Node didn't have enough resource: {resource}, requested: {requested}, "
        f"used: {used}, capacity: {capacity}"
    )


def _nano(t: float) -> str:
    """RFC3339Nano as Go prints it: trailing zeros of the fraction dropped."""
    ns = round(t * 1_000_000_000)
    frac = f"{ns % 1_000_000_000:09d}".rstrip("0")
    base = stamp(ns // 1_000_000_000)[:-1]
    return f"{base}.{frac}Z" if frac else f"{base}Z"


NOT_READY_MESSAGE = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)
# recordNodeStatusEvent reasons per condition: (when it turns False, when it turns True).
NODE_STATUS_EVENTS = {
    "MemoryPressure": ("NodeHasSufficientMemory", "NodeHasInsufficientMemory"),
    "DiskPressure": ("NodeHasNoDiskPressure", "NodeHasDiskPressure"),
    "PIDPressure": ("NodeHasSufficientPID", "NodeHasInsufficientPID"),
    "Ready": ("NodeNotReady", "NodeReady"),
}
EVICTION_PERIOD = 10.0  # the eviction manager's housekeeping interval
PRESSURE_TRANSITION = 300.0  # evictionPressureTransitionPeriod
EVICTION_THRESHOLD = "100Mi"  # the default evictionHard memory.available


_capacities: dict[int, tuple[Obj, tuple[int, int, int]]] = {}


def _capacity(alloc: Obj) -> tuple[int, int, int]:
    """(pods, milli-cpu, memory bytes) of an allocatable map, parsed once per map."""
    hit = _capacities.get(id(alloc))
    if hit is not None and hit[0] is alloc:
        return hit[1]
    parsed = (
        int(alloc.get("pods", "110")),
        cpu_millis(alloc.get("cpu", "0")),
        mem_bytes(alloc.get("memory", "0")),
    )
    if len(_capacities) > 65536:
        _capacities.clear()
    _capacities[id(alloc)] = (alloc, parsed)
    return parsed


def _eviction_message(ps: PodState) -> str:
    """evictionMessage (pkg/kubelet/eviction/helpers.go) for a memory.available eviction."""
    message = "The node was low on resource: memory. "
    message += f"Threshold quantity: {EVICTION_THRESHOLD}, available: 92160Ki. "
    for c in ps.pod["spec"]["containers"]:
        request = ((c.get("resources") or {}).get("requests") or {}).get("memory")
        used = max(mem_bytes(request) * 2, 256 * 2**20) // 2**20
        message += (
            f"Container {c['name']} was using {used}Mi, request is {request or 0}, "
            "has larger consumption of memory. "
        )
    return message
