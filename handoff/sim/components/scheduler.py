"""kube-scheduler: queue, filters, least-allocated scoring, assume cache, asynchronous binding.

Filters run in the default plugin order (NodeUnschedulable, TaintToleration, NodeAffinity,
NodePorts, NodeResourcesFit) and the first failing plugin names the node's reason, so
FailedScheduling messages read like the real FitError. Unschedulable pods are retried after
their backoff (1 s doubling to 10 s) when a cluster event that could help arrives, and
otherwise after 5 minutes (podMaxInUnschedulablePodsDuration), as the scheduling queue does.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain

from handoff.sim.clock import Loop
from handoff.sim.components.apiserver import ApiError, APIServer, set_condition
from handoff.sim.components.events import SeriesRecorder
from handoff.sim.objects import (
    Obj,
    cpu_millis,
    edit,
    host_ports,
    matches_node,
    mem_bytes,
    pod_requests,
    ports_conflict,
    untolerated,
)

UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
NOT_HELPFUL = "Preemption is not helpful for scheduling"


@dataclass
class SchedulerTimings:
    watch: tuple[float, float] = (0.001, 0.010)
    cycle: tuple[float, float] = (0.001, 0.004)
    bind: tuple[float, float] = (0.004, 0.020)
    backoff_initial: float = 1.0
    backoff_max: float = 10.0
    unschedulable_flush: float = 300.0
    percentage_of_nodes_to_score: int = 0  # 0: adaptive, as the default config
    # Schedulers before v1.32 named the taint: "had untolerated taint {key: value}".
    legacy_taint_message: bool = False
    # v1.20's texts (seen on v1.20.2): "had taint {key: value}, that the pod didn't
    # tolerate", "didn't match Pod's node affinity", and no preemption sentence; and its
    # event series (SeriesRecorder.legacy_series).
    v1_20_texts: bool = False


class NodeInfo:
    __slots__ = (
        "alloc_cpu",
        "alloc_mem",
        "alloc_pods",
        "fit_for",
        "fit_score",
        "name",
        "npods",
        "obj",
        "plain",
        "req_cpu",
        "req_mem",
        "signature",
        "taints",
        "unschedulable",
    )

    def __init__(self, obj: Obj) -> None:
        self.req_cpu = self.req_mem = self.npods = 0
        self.fit_for: tuple[int, int] | None = None
        self.fit_score = -1
        self.update(obj)

    def update(self, obj: Obj) -> bool:
        """Take a new Node; returns whether anything the filters look at changed."""
        self.obj = obj
        self.fit_for = None
        self.name = obj["metadata"]["name"]
        alloc = obj["status"].get("allocatable") or {}
        self.alloc_cpu = cpu_millis(alloc.get("cpu", "0"))
        self.alloc_mem = mem_bytes(alloc.get("memory", "0"))
        self.alloc_pods = int(alloc.get("pods", "110"))
        spec = obj["spec"]
        self.taints = [
            t for t in spec.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")
        ]
        self.unschedulable = bool(spec.get("unschedulable"))
        self.plain = not self.taints and not self.unschedulable
        signature = (
            self.alloc_cpu,
            self.alloc_mem,
            self.alloc_pods,
            self.unschedulable,
            tuple((t["key"], t.get("value"), t["effect"]) for t in self.taints),
            tuple(sorted((obj["metadata"].get("labels") or {}).items())),
        )
        changed = signature != getattr(self, "signature", None)
        self.signature = signature
        return changed


class Scheduler:
    """One scheduler profile (``schedulerName``) with its cache and queue."""

    def __init__(
        self,
        api: APIServer,
        timings: SchedulerTimings | None = None,
        name: str = "default-scheduler",
        host: str = "control-plane",
    ) -> None:
        self.api = api
        self.loop: Loop = api.loop
        self.t = timings or SchedulerTimings()
        self.name = name
        self.recorder = SeriesRecorder(
            api, name, f"{name}-{host}", legacy_series=self.t.v1_20_texts
        )
        self.nodes: dict[str, NodeInfo] = {}
        self.unknown_nodes: dict[str, list[int]] = {}
        self.order: list[str] = []
        self.infos: list[NodeInfo] = []  # NodeInfo in ``order``: the filter loop's list
        self.cache: dict[str, tuple[str, int, int]] = {}  # uid -> (node, cpu, mem)
        # node -> uid -> host ports, for the pods that claim any (NodePorts)
        self.ports: dict[str, dict[str, frozenset[tuple[str, str, int]]]] = {}
        self.assumed: set[str] = set()
        self.active: deque[tuple[str, str, str]] = deque()
        self.queued: set[str] = set()
        self.unschedulable: dict[str, tuple[tuple[str, str, str], float]] = {}
        self.attempts: dict[str, int] = {}
        self.busy = False
        self.next_start = 0
        self.running = True
        # Test and scenario hooks: called with (pod, node) on assume; may return extra
        # seconds of binding latency (a slow API call).
        self.on_assume: list[Callable[[Obj, str], float | None]] = []
        self.stats = {"scheduled": 0, "failed": 0, "conflicts": 0}
        self._delivered: dict[str, float] = {}
        api.subscribe("pods", self._deliver_pod)
        api.subscribe("nodes", self._deliver_node)
        self.loop.every(30.0, self._flush_unschedulable)

    # --- informers -------------------------------------------------------------------------

    def _deliver_pod(self, type_: str, pod: Obj) -> None:
        spec = pod["spec"]
        if not spec.get("nodeName"):
            if spec.get("schedulerName") != self.name:
                return
        elif (
            type_ == "MODIFIED"
            and pod["metadata"]["uid"] in self.cache
            and pod["metadata"]["uid"] not in self.assumed
            and pod["status"].get("phase") not in ("Succeeded", "Failed")
        ):
            return  # a status change of a pod already counted: nothing for the cache
        # _arrival("pods"), inlined: every pod change comes through here.
        loop = self.loop
        lo, hi = self.t.watch
        when = loop.now + (lo + (hi - lo) * loop._random())
        delivered = self._delivered
        last = delivered.get("pods", 0.0)
        if last > when:  # max(last, when) keeps ``last`` only when it is greater
            when = last
        delivered["pods"] = when
        loop.call_at(when, self._on_pod, type_, pod)

    def _deliver_node(self, type_: str, node: Obj) -> None:
        self.loop.call_at(self._arrival("nodes"), self._on_node, type_, node)

    def _arrival(self, stream: str) -> float:
        """Each informer's watch is one ordered stream: latency never reorders it."""
        when = max(
            self._delivered.get(stream, 0.0), self.loop.now + self.loop.uniform(self.t.watch)
        )
        self._delivered[stream] = when
        return when

    def _on_pod(self, type_: str, pod: Obj) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        node_name = pod["spec"].get("nodeName")
        terminal = pod["status"].get("phase") in ("Succeeded", "Failed")
        if node_name:
            self._forget_queue(uid)
            if type_ == "DELETED" or terminal:
                if self._remove(uid):
                    self._move_all()
            else:
                self._add(uid, node_name, pod)
            return
        if type_ == "DELETED" or meta.get("deletionTimestamp"):
            self._forget_queue(uid)
            self._remove(uid)
            return
        if type_ == "ADDED" and uid not in self.queued and uid not in self.unschedulable:
            self._enqueue((meta["namespace"], meta["name"], uid))

    def _on_node(self, type_: str, node: Obj) -> None:
        name = node["metadata"]["name"]
        if type_ == "DELETED":
            gone = self.nodes.pop(name, None)
            if gone is not None:
                self.order.remove(name)
                self.infos.remove(gone)
                if gone.npods:
                    self.unknown_nodes[name] = [gone.req_cpu, gone.req_mem, gone.npods]
            return
        info = self.nodes.get(name)
        if info is None:
            info = NodeInfo(node)
            self.nodes[name] = info
            self.order.append(name)
            self.infos.append(info)
            waiting = self.unknown_nodes.pop(name, None)
            if waiting is not None:
                info.req_cpu, info.req_mem, info.npods = waiting
                info.fit_for = None
            self._move_all()
        elif info.update(node):
            self._move_all()

    # --- cache -----------------------------------------------------------------------------

    def adopt(self, pod: Obj) -> None:
        """A bound pod from the informer's initial list (see ``APIServer.restore``)."""
        self._add(pod["metadata"]["uid"], pod["spec"]["nodeName"], pod)

    def _add(self, uid: str, node_name: str, pod: Obj) -> None:
        self.assumed.discard(uid)
        if uid in self.cache:
            return
        cpu, mem = pod_requests(pod)
        self.cache[uid] = (node_name, cpu, mem)
        self._claim_ports(uid, node_name, pod)
        info = self.nodes.get(node_name)
        if info is not None:
            info.req_cpu += cpu
            info.req_mem += mem
            info.npods += 1
            info.fit_for = None
        else:
            # A pod on a node the informer has not delivered yet (or never will).
            waiting = self.unknown_nodes.setdefault(node_name, [0, 0, 0])
            waiting[0] += cpu
            waiting[1] += mem
            waiting[2] += 1

    def _remove(self, uid: str) -> bool:
        self.assumed.discard(uid)
        entry = self.cache.pop(uid, None)
        if entry is None:
            return False
        claimed = self.ports.get(entry[0])
        if claimed is not None:
            claimed.pop(uid, None)
        info = self.nodes.get(entry[0])
        if info is not None:
            info.req_cpu -= entry[1]
            info.req_mem -= entry[2]
            info.npods -= 1
            info.fit_for = None
        else:
            waiting = self.unknown_nodes.get(entry[0])
            if waiting is not None:
                waiting[0] -= entry[1]
                waiting[1] -= entry[2]
                waiting[2] -= 1
                if not waiting[2]:
                    del self.unknown_nodes[entry[0]]
        return True

    def _claim_ports(self, uid: str, node_name: str, pod: Obj) -> None:
        ports = host_ports(pod)
        if ports:
            self.ports.setdefault(node_name, {})[uid] = ports

    # --- queue -----------------------------------------------------------------------------

    def _enqueue(self, key: tuple[str, str, str]) -> None:
        self.queued.add(key[2])
        self.active.append(key)
        if not self.busy:
            self.busy = True
            self.loop.call_later(0.0, self._cycle)

    def _forget_queue(self, uid: str) -> None:
        self.queued.discard(uid)
        self.unschedulable.pop(uid, None)
        self.attempts.pop(uid, None)

    def _backoff(self, uid: str) -> float:
        n = self.attempts.get(uid, 1)
        return min(self.t.backoff_initial * 2 ** (n - 1), self.t.backoff_max)

    def _move_all(self) -> None:
        """A cluster event: unschedulable pods go back once their backoff has passed."""
        if not self.unschedulable:
            return
        now = self.loop.now
        for uid, (key, failed_at) in list(self.unschedulable.items()):
            del self.unschedulable[uid]
            ready_at = failed_at + self._backoff(uid)
            if ready_at <= now:
                self._enqueue(key)
            else:
                self.queued.add(uid)
                self.loop.call_at(ready_at, self._from_backoff, key)

    def _from_backoff(self, key: tuple[str, str, str]) -> None:
        if key[2] in self.queued:
            self.queued.discard(key[2])
            self._enqueue(key)

    def _flush_unschedulable(self) -> None:
        now = self.loop.now
        for uid, (key, failed_at) in list(self.unschedulable.items()):
            if now - failed_at >= self.t.unschedulable_flush:
                del self.unschedulable[uid]
                self._enqueue(key)

    # --- scheduling cycle ------------------------------------------------------------------

    def _cycle(self) -> None:
        while self.active:
            key = self.active.popleft()
            if key[2] not in self.queued:
                continue
            self.queued.discard(key[2])
            pod = self.api.find("pods", key[0], key[1])
            if pod is None or pod["metadata"]["uid"] != key[2] or pod["spec"].get("nodeName"):
                continue
            if not self.running:
                self.unschedulable[key[2]] = (key, self.loop.now)
                continue
            self._schedule_one(key, pod)
            self.loop.call_later(self.loop.uniform(self.t.cycle), self._cycle)
            return
        self.busy = False

    def _num_to_find(self, n: int) -> int:
        if n < 100:
            return n
        pct = self.t.percentage_of_nodes_to_score or max(5, 50 - n // 125)
        return max(100, n * pct // 100) if pct < 100 else n

    def _schedule_one(self, key: tuple[str, str, str], pod: Obj) -> None:
        spec = pod["spec"]
        # Pods stamped from one template share one requests tuple: it keys each node's
        # cached fast-path score, which any change to the node's pods or Node clears.
        req = pod_requests(pod)
        cpu, mem = req
        tolerations = spec.get("tolerations") or []
        wanted_ports = host_ports(pod)
        # Pods with node affinity or host ports skip the fast path and its cached scores.
        needs_affinity = bool(spec.get("nodeSelector") or spec.get("affinity") or wanted_ports)
        infos = self.infos
        n = len(infos)
        want = self._num_to_find(n)
        reasons: dict[str, int] = {}
        best: list[NodeInfo] = []
        best_score = -1
        found = processed = 0
        start = self.next_start % n if n else 0
        for index in chain(range(start, n), range(start)):
            info = infos[index]
            processed += 1
            if info.fit_for is req and not needs_affinity:
                score = info.fit_score
            else:
                # Fast path for the common node: no taints, schedulable, room to spare.
                if (
                    info.plain
                    and not needs_affinity
                    and info.npods < info.alloc_pods
                    and cpu <= info.alloc_cpu - info.req_cpu
                    and mem <= info.alloc_mem - info.req_mem
                ):
                    score = _least_allocated(info, cpu, mem)
                else:
                    score = -1
                if not needs_affinity:
                    info.fit_for = req
                    info.fit_score = score
            if score < 0:
                reason = self._filter(info, cpu, mem, tolerations, spec, wanted_ports)
                if reason is not None:
                    for r in reason:
                        reasons[r] = reasons.get(r, 0) + 1
                    continue
                score = _least_allocated(info, cpu, mem)
            found += 1
            if score > best_score:
                best, best_score = [info], score
            elif score == best_score:
                best.append(info)
            if found >= want:
                break
        self.next_start = (start + processed) % n if n else 0
        if not best:
            self._fail(key, pod, fit_error(n, reasons, preemption=not self.t.v1_20_texts))
            return
        # selectHost: a uniformly random one of the best-scored nodes.
        chosen = best[0] if len(best) == 1 else best[self.loop.rng.randrange(len(best))]
        self._assume(key, pod, chosen, cpu, mem)

    def _filter(
        self,
        info: NodeInfo,
        cpu: int,
        mem: int,
        tolerations: list[Obj],
        spec: Obj,
        wanted_ports: frozenset[tuple[str, str, int]] = frozenset(),
    ) -> tuple[str, ...] | None:
        if info.unschedulable and untolerated([UNSCHEDULABLE_TAINT], tolerations, ("NoSchedule",)):
            return ("node(s) were unschedulable",)
        if info.taints:
            taint = untolerated(info.taints, tolerations, ("NoSchedule", "NoExecute"))
            if taint is not None:
                key, value = taint["key"], taint.get("value", "")
                if self.t.v1_20_texts:
                    return (f"node(s) had taint {{{key}: {value}}}, that the pod didn't tolerate",)
                if self.t.legacy_taint_message:
                    return (f"node(s) had untolerated taint {{{key}: {value}}}",)
                return ("node(s) had untolerated taint(s)",)
        if (spec.get("nodeSelector") or spec.get("affinity")) and not matches_node(spec, info.obj):
            if self.t.v1_20_texts:
                return ("node(s) didn't match Pod's node affinity",)
            return ("node(s) didn't match Pod's node affinity/selector",)
        if wanted_ports:
            used = self.ports.get(info.name)
            if used and any(ports_conflict(wanted_ports, claimed) for claimed in used.values()):
                return ("node(s) didn't have free ports for the requested pod ports",)
        out: list[str] = []
        if info.npods + 1 > info.alloc_pods:
            out.append("Too many pods")
        if cpu and cpu > info.alloc_cpu - info.req_cpu:
            out.append("Insufficient cpu")
        if mem and mem > info.alloc_mem - info.req_mem:
            out.append("Insufficient memory")
        return tuple(out) if out else None

    def _assume(
        self, key: tuple[str, str, str], pod: Obj, info: NodeInfo, cpu: int, mem: int
    ) -> None:
        uid = key[2]
        self.cache[uid] = (info.name, cpu, mem)
        self._claim_ports(uid, info.name, pod)
        self.assumed.add(uid)
        info.req_cpu += cpu
        info.req_mem += mem
        info.npods += 1
        info.fit_for = None
        self.attempts.pop(uid, None)
        delay = self.loop.uniform(self.t.bind)
        for hook in self.on_assume:
            extra = hook(pod, info.name)
            if extra:
                delay += extra
        self.loop.call_later(delay, self._bind, key, info.name, pod)

    def _bind(self, key: tuple[str, str, str], node_name: str, pod: Obj) -> None:
        try:
            bound = self.api.bind(key[0], key[1], node_name)
        except ApiError:
            self.stats["conflicts"] += 1
            if key[2] in self.assumed:
                self._remove(key[2])
            return
        self.stats["scheduled"] += 1
        self.recorder.event(
            bound,
            "Normal",
            "Scheduled",
            "Binding",
            f"Successfully assigned {key[0]}/{key[1]} to {node_name}",
        )

    def _fail(self, key: tuple[str, str, str], pod: Obj, message: str) -> None:
        self.stats["failed"] += 1
        self.recorder.event(pod, "Warning", "FailedScheduling", "Scheduling", message)
        uid = key[2]
        self.attempts[uid] = self.attempts.get(uid, 0) + 1
        self.unschedulable[uid] = (key, self.loop.now)
        new = edit(pod, "status")
        if set_condition(
            new["status"], "PodScheduled", "False", self.loop.now, "Unschedulable", message
        ):
            with contextlib.suppress(ApiError):
                self.api.update("pods", new)


def _least_allocated(info: NodeInfo, cpu: int, mem: int) -> int:
    """NodeResourcesFit LeastAllocated: integer 0-100 per resource, averaged."""
    cpu_score = (
        (info.alloc_cpu - info.req_cpu - cpu) * 100 // info.alloc_cpu if info.alloc_cpu else 0
    )
    mem_score = (
        (info.alloc_mem - info.req_mem - mem) * 100 // info.alloc_mem if info.alloc_mem else 0
    )
    return (cpu_score + mem_score) // 2


def fit_error(n: int, reasons: dict[str, int], preemption: bool = True) -> str:
    """framework.FitError.Error() plus the default preemption plugin's PostFilter message
    (none at v1.20, seen on v1.20.2: ``preemption=False``).

    Every simulated pod has the same priority, so preemption never finds anything to evict;
    real clusters then report every node as "Preemption is not helpful for scheduling".
    """
    if n == 0:
        return "no nodes available to schedule pods"
    histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
    message = f"0/{n} nodes are available: " + ", ".join(histogram) + "."
    if not preemption:
        return message
    return f"{message} preemption: 0/{n} nodes are available: {n} {NOT_HELPFUL}."
