#!/usr/bin/env python3
"""Write the scripted watch traces in ``tests/data/traces/`` (deterministically).

These traces are the yardstick the timeline engine is tested against, so they
are written from Kubernetes' behaviour (``../shared/HANDOFF_FACTS.md``, the
seeds, the real objects in ``../shared/traces/real/``), never from the engine.

Run ``python tests/data/build_traces.py`` from the repository root; re-running
reproduces every file byte for byte (no clock, no unseeded randomness).

How a trace is made: a scenario mutates live Pod/Node/Event objects in the
order the cluster changed them. Every change gets the next cluster-wide
resourceVersion and is observed by its watch (pods, events, nodes) 5-50 ms
later; within one watch the order is kept, across watches it is not (an Event
may be observed before the Pod change it relates to). Lines are then written
in observed order. Expected milestones are computed mechanically from the
watch events that reveal them, with the time rule in ``traces/README.md``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))

from handoff.core.trace import TraceWriter  # noqa: E402

OUT = HERE / "traces"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
BASE_US = int((datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC) - EPOCH).total_seconds()) * 1_000_000
SECOND = 1_000_000
KUBELET_VERSION = "v1.34.3"
STUCK_AFTER = 60

# ---------------------------------------------------------------- formatting


def fmt_us(us: int) -> str:
    """RFC 3339 with microseconds, as handoff.core.trace.format_time writes it."""
    return (EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ts(us: int) -> str:
    """metav1.Time: second precision (truncated)."""
    return (EPOCH + timedelta(microseconds=us - us % SECOND)).strftime("%Y-%m-%dT%H:%M:%SZ")


def floor_s(us: int) -> int:
    return us - us % SECOND


def det_uid(*parts: str) -> str:
    digest = hashlib.sha256("/".join(parts).encode()).digest()[:16]
    return str(uuid.UUID(bytes=digest, version=4))


def det_hex(n: int, *parts: str) -> str:
    out = ""
    i = 0
    while len(out) < n:
        out += hashlib.sha256(("/".join(parts) + f"#{i}").encode()).hexdigest()
        i += 1
    return out[:n]


def det_suffix(n: int, *parts: str) -> str:
    """Like Kubernetes' utilrand.String: consonants and digits without vowels/0/1/3."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:n])


DEFAULT_TOLERATIONS = [
    {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
]

MILESTONES = (
    "created",
    "bound",
    "kubelet_ack",
    "admitted",
    "rejected",
    "sandbox_ready",
    "initialized",
    "containers_started",
    "running",
    "ready",
    "finished",
    "deleted",
)

# ---------------------------------------------------------------- the trace


class Trace:
    """One trace file: an ordered record of changes, and what is expected of it."""

    def __init__(self, file: str, cluster: str, start_min: int, rv0: int, about: str) -> None:
        self.file = file
        self.cluster = cluster
        self.about = about
        self.t0 = BASE_US + start_min * 60 * SECOND
        self.rv = rv0
        self.rng = random.Random(file)
        self.lines: list[tuple[int, int, str, dict[str, Any]]] = []
        self.last_change = 0
        self.last_obs: dict[str, int] = {}
        self.reveals: list[tuple[int, int, str, str, int | None]] = []
        self.nodes: dict[str, NodeSim] = {}
        self.expected: dict[str, dict[str, Any]] = {}
        self.assert_keys: dict[str, list[str]] = {}
        self.at: int | None = None
        self.allow_late = False

    # -- time and versions
    def us(self, rel: float) -> int:
        return self.t0 + round(rel * SECOND)

    def next_rv(self) -> str:
        self.rv += self.rng.choice((1, 1, 1, 2, 3, 4))
        return str(self.rv)

    # -- recording
    def emit(
        self,
        rel: float,
        stream: str,
        type_: str,
        obj: dict[str, Any],
        *,
        lat_ms: float | None = None,
        reveals: dict[str, dict[str, int | None]] | None = None,
        not_before: int | None = None,
    ) -> int:
        """A change at ``rel`` seconds, observed by watch ``stream`` a little later."""
        t = self.us(rel)
        if t < self.last_change:
            raise ValueError(f"{self.file}: change at {rel} goes back in time")
        self.last_change = t
        obj["metadata"]["resourceVersion"] = self.next_rv()
        lat = round(lat_ms * 1000) if lat_ms is not None else self.rng.randint(5_000, 50_000)
        obs = max(t + lat, self.last_obs.get(stream, 0) + self.rng.randint(60, 700))
        if not_before is not None:
            obs = max(obs, not_before + self.rng.randint(300, 4000))
        return self._append(obs, stream, type_, obj, reveals)

    def listed(
        self,
        rel_obs: float,
        stream: str,
        obj: dict[str, Any],
        reveals: dict[str, dict[str, int | None]] | None = None,
    ) -> int:
        """An object that already existed, delivered by the initial list as ADDED."""
        obj["metadata"]["resourceVersion"] = self.next_rv()
        obs = max(self.us(rel_obs), self.last_obs.get(stream, 0) + 40)
        return self._append(obs, stream, "ADDED", obj, reveals)

    def replay(self, rel_obs: float, stream: str, type_: str, snapshot: dict[str, Any]) -> int:
        """A line carrying an object exactly as already seen (relist), or a Status/bookmark."""
        obs = max(self.us(rel_obs), self.last_obs.get(stream, 0) + 40)
        return self._append(obs, stream, type_, snapshot, None)

    def _append(self, obs, stream, type_, obj, reveals) -> int:
        self.last_obs[stream] = obs
        order = len(self.lines)
        self.lines.append((obs, order, type_, copy.deepcopy(obj)))
        for key, facts in (reveals or {}).items():
            for milestone, own in facts.items():
                self.reveals.append((obs, order, key, milestone, own))
        return obs

    # -- expectations
    def expect(
        self,
        pod: PodSim,
        verdict: str,
        binding: str | None,
        *,
        reason: Any = "<unset>",
        milestones: tuple[str, ...] = (),
    ) -> None:
        entry: dict[str, Any] = {"uid": pod.uid, "verdict": verdict}
        if reason != "<unset>":
            entry["reason"] = reason
        entry["binding"] = binding
        entry["node"] = pod.obj["spec"].get("nodeName")
        self.expected[pod.key] = entry
        self.assert_keys[pod.key] = list(milestones)

    def milestone_values(self) -> tuple[dict[str, dict[str, int]], set[tuple[str, str]]]:
        """Every revealing watch event per (pod, milestone), combined by the time rule;
        also which (pod, milestone) ended on the object's own timestamp.

        A reveal seen more than a second after its own (truncated) timestamp gives
        that coarse second; the earliest evidence wins, except that a precise time
        inside a coarse second refines it and a coarse second never undercuts a
        precise time it cannot contradict.
        """
        found: dict[str, dict[str, int]] = {}
        late: set[tuple[str, str]] = set()
        for obs, _order, key, milestone, own in sorted(self.reveals):
            per_pod = found.setdefault(key, {})
            coarse = own is not None and own + SECOND < obs
            when = own if coarse else obs
            if milestone in per_pod:
                current, was_coarse = per_pod[milestone], (key, milestone) in late
                if coarse and not was_coarse and current < when + SECOND:
                    continue
                if was_coarse and not coarse and when >= current + SECOND:
                    continue
                if coarse == was_coarse and when >= current:
                    continue
            per_pod[milestone] = when
            if coarse:
                late.add((key, milestone))
            else:
                late.discard((key, milestone))
        return found, late

    def write(self) -> tuple[str, dict[str, Any]]:
        ordered = sorted(self.lines, key=lambda line: (line[0], line[1]))
        with TraceWriter(OUT / self.file, cluster=self.cluster, source="scripted") as writer:
            for obs, _order, type_, obj in ordered:
                writer.write(fmt_us(obs), type_, obj)
        values, late = self.milestone_values()
        pods: dict[str, Any] = {}
        for key, entry in self.expected.items():
            got = values.get(key, {})
            ms = {}
            for name in MILESTONES:
                if name in self.assert_keys[key]:
                    # A live change is seen within a second of its own (truncated)
                    # timestamp. If a scenario crossed that line by accident, the time
                    # rule would pick the object's timestamp: only lists may do that.
                    if (key, name) in late and not self.allow_late:
                        raise ValueError(f"{self.file}: {key} {name} took its own timestamp")
                    ms[name] = fmt_us(got[name]) if name in got else None
            pods[key] = {**entry, "milestones": ms}
        doc: dict[str, Any] = {}
        if self.at is not None:
            doc["at"] = fmt_us(self.at)
        doc["stuck_after"] = STUCK_AFTER
        doc["pods"] = pods
        return self.file, doc


# ---------------------------------------------------------------- nodes


class NodeSim:
    def __init__(
        self,
        tr: Trace,
        name: str,
        index: int,
        *,
        cpu: str = "4",
        memory_ki: int = 16365356,
        pods: str = "110",
        taints: list[dict[str, Any]] | None = None,
        labels: dict[str, str] | None = None,
        control_plane: bool = False,
    ) -> None:
        self.tr = tr
        self.name = name
        self.ip = f"10.0.1.{10 + index}"
        self.pod_net = f"10.244.{index}"
        self.next_ip = 4
        born = tr.t0 - 9 * 24 * 3600 * SECOND + index * 95 * SECOND
        beat = tr.t0 - 3 * 60 * SECOND - index * 17 * SECOND
        node_labels = {
            "beta.kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
        }
        if control_plane:
            node_labels["node-role.kubernetes.io/control-plane"] = ""
            node_labels["node.kubernetes.io/exclude-from-external-load-balancers"] = ""
        node_labels.update(labels or {})
        spec: dict[str, Any] = {
            "podCIDR": f"{self.pod_net}.0/24",
            "podCIDRs": [f"{self.pod_net}.0/24"],
            "providerID": f"kind://docker/{tr.cluster}/{name}",
        }
        if taints:
            spec["taints"] = taints
        resources = {
            "cpu": cpu,
            "ephemeral-storage": "102626232Ki",
            "hugepages-1Gi": "0",
            "hugepages-2Mi": "0",
            "memory": f"{memory_ki}Ki",
            "pods": pods,
        }
        self.obj: dict[str, Any] = {
            "kind": "Node",
            "apiVersion": "v1",
            "metadata": {
                "name": name,
                "uid": det_uid(tr.cluster, "node", name),
                "resourceVersion": "",
                "creationTimestamp": ts(born),
                "labels": node_labels,
                "annotations": {
                    "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock",
                    "node.alpha.kubernetes.io/ttl": "0",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                },
            },
            "spec": spec,
            "status": {
                "capacity": resources,
                "allocatable": dict(resources),
                "conditions": [
                    self._cond(
                        "MemoryPressure",
                        "False",
                        beat,
                        born,
                        "KubeletHasSufficientMemory",
                        "kubelet has sufficient memory available",
                    ),
                    self._cond(
                        "DiskPressure",
                        "False",
                        beat,
                        born,
                        "KubeletHasNoDiskPressure",
                        "kubelet has no disk pressure",
                    ),
                    self._cond(
                        "PIDPressure",
                        "False",
                        beat,
                        born,
                        "KubeletHasSufficientPID",
                        "kubelet has sufficient PID available",
                    ),
                    self._cond(
                        "Ready",
                        "True",
                        beat,
                        born + 21 * SECOND,
                        "KubeletReady",
                        "kubelet is posting ready status",
                    ),
                ],
                "addresses": [
                    {"type": "InternalIP", "address": self.ip},
                    {"type": "Hostname", "address": name},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {
                    "machineID": det_hex(32, tr.cluster, name, "machine"),
                    "systemUUID": det_uid(tr.cluster, name, "system"),
                    "bootID": det_uid(tr.cluster, name, "boot"),
                    "kernelVersion": "6.8.0-1021-aws",
                    "osImage": "Debian GNU/Linux 12 (bookworm)",
                    "containerRuntimeVersion": "containerd://2.1.4",
                    "kubeletVersion": KUBELET_VERSION,
                    "kubeProxyVersion": "",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                },
            },
        }
        tr.nodes[name] = self

    @staticmethod
    def _cond(type_, status, beat, trans, reason, message):
        return {
            "type": type_,
            "status": status,
            "lastHeartbeatTime": ts(beat),
            "lastTransitionTime": ts(trans),
            "reason": reason,
            "message": message,
        }

    def pod_ip(self) -> str:
        self.next_ip += 1
        return f"{self.pod_net}.{self.next_ip}"

    def list(self, rel_obs: float = 0.0) -> None:
        self.tr.listed(rel_obs, "nodes", self.obj)

    def modified(self, rel: float) -> None:
        self.tr.emit(rel, "nodes", "MODIFIED", self.obj)

    def add_taint(self, rel: float, taint: dict[str, Any]) -> None:
        self.obj["spec"].setdefault("taints", []).append(taint)
        self.modified(rel)

    def go_unknown(self, rel: float) -> None:
        """Node lifecycle controller: no heartbeat (Lease) within the grace period."""
        now = ts(self.tr.us(rel))
        for cond in self.obj["status"]["conditions"]:
            cond["status"] = "Unknown"
            cond["lastTransitionTime"] = now
            cond["reason"] = "NodeStatusUnknown"
            cond["message"] = "Kubelet stopped posting node status."
        self.modified(rel)


# ---------------------------------------------------------------- pods


def qos_class(containers: list[dict[str, Any]]) -> str:
    requests = [c.get("resources", {}).get("requests", {}) for c in containers]
    limits = [c.get("resources", {}).get("limits", {}) for c in containers]
    if not any(requests) and not any(limits):
        return "BestEffort"
    for req, lim in zip(requests, limits, strict=True):
        if set(lim) != {"cpu", "memory"}:
            return "Burstable"
        if req and req != lim:
            return "Burstable"
    return "Guaranteed"


def container(
    name: str,
    image: str,
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    env: list[dict[str, Any]] | None = None,
    ports: list[int] | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": image}
    if command:
        c["command"] = command
    if ports:
        c["ports"] = [{"containerPort": p, "protocol": "TCP"} for p in ports]
    if env:
        c["env"] = env
    res: dict[str, Any] = {}
    if limits:
        res["limits"] = limits
    if requests:
        res["requests"] = requests
    c["resources"] = res
    c["terminationMessagePath"] = "/dev/termination-log"
    c["terminationMessagePolicy"] = "File"
    c["imagePullPolicy"] = "Always" if image.endswith(":latest") else "IfNotPresent"
    return c


def full_image(image: str) -> str:
    first = image.split("/")[0]
    if "/" in image and ("." in first or ":" in first or first == "localhost"):
        return image
    if "/" not in image:
        return f"docker.io/library/{image}"
    return f"docker.io/{image}"


class PodSim:
    """A Pod as the API server stores it, changed step by step like the cluster would."""

    def __init__(
        self,
        tr: Trace,
        ns: str,
        name: str,
        containers: list[dict[str, Any]],
        *,
        node: str | None = None,
        owner: dict[str, Any] | None = None,
        generate_name: str | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, Any]] | None = None,
        restart: str = "Always",
        scheduler: str = "default-scheduler",
        finalizers: list[str] | None = None,
        static_hash: str | None = None,
        key: str | None = None,
        incarnation: str = "",
        extra_spec: dict[str, Any] | None = None,
        created_at: int | None = None,
    ) -> None:
        self.tr = tr
        self.ns = ns
        self.name = name
        self.key = key or f"{ns}/{name}"
        self.uid = det_uid(tr.cluster, "pod", ns, name, incarnation)
        self.static_hash = static_hash
        self.containers = containers
        self.created_at = created_at
        self.started: dict[str, int] = {}
        vol = f"kube-api-access-{det_suffix(5, self.uid, 'vol')}"
        self.volume = None if static_hash else vol
        meta: dict[str, Any] = {"name": name}
        if generate_name:
            meta["generateName"] = generate_name
        meta["namespace"] = ns
        meta["uid"] = self.uid
        meta["resourceVersion"] = ""
        meta["creationTimestamp"] = None
        if labels:
            meta["labels"] = labels
        if annotations:
            meta["annotations"] = annotations
        if owner:
            meta["ownerReferences"] = [owner]
        if finalizers:
            meta["finalizers"] = finalizers
        spec: dict[str, Any] = {}
        if not static_hash:
            spec["volumes"] = [
                {
                    "name": vol,
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "name": "kube-root-ca.crt",
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "path": "namespace",
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                        }
                                    ]
                                }
                            },
                        ],
                        "defaultMode": 420,
                    },
                }
            ]
            for c in containers:
                c["volumeMounts"] = [
                    {
                        "name": vol,
                        "readOnly": True,
                        "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    }
                ]
        spec["containers"] = containers
        spec["restartPolicy"] = restart
        spec["terminationGracePeriodSeconds"] = 30
        spec["dnsPolicy"] = "ClusterFirst"
        if node_selector:
            spec["nodeSelector"] = node_selector
        if not static_hash:
            spec["serviceAccountName"] = "default"
            spec["serviceAccount"] = "default"
        if node:
            spec["nodeName"] = node
        spec["securityContext"] = {}
        spec["schedulerName"] = scheduler
        spec["tolerations"] = (tolerations or []) + (
            [] if static_hash else copy.deepcopy(DEFAULT_TOLERATIONS)
        )
        spec["priority"] = 0
        spec["enableServiceLinks"] = True
        spec["preemptionPolicy"] = "PreemptLowerPriority"
        if extra_spec:
            spec.update(extra_spec)
        spec["containers"] = [_ordered(c, CONTAINER_ORDER) for c in containers]
        self.containers = spec["containers"]
        spec = _ordered(spec, SPEC_ORDER)
        self.qos = qos_class(containers)
        self.obj: dict[str, Any] = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": meta,
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": self.qos},
        }

    # -- helpers
    @property
    def node(self) -> str | None:
        return self.obj["spec"].get("nodeName")

    @property
    def rv(self) -> str:
        return self.obj["metadata"]["resourceVersion"]

    @property
    def status(self) -> dict[str, Any]:
        return self.obj["status"]

    def ref(self, field: str | None = None) -> dict[str, Any]:
        ref = {
            "kind": "Pod",
            "namespace": self.ns,
            "name": self.name,
            "uid": self.static_hash or self.uid,
            "apiVersion": "v1",
        }
        if self.rv and not self.static_hash:  # the kubelet's static pod (from file) has none
            ref["resourceVersion"] = self.rv
        if field:
            ref["fieldPath"] = field
        return ref

    def _emit(self, rel: float, type_: str = "MODIFIED", *, lat_ms=None, reveals=None) -> int:
        return self.tr.emit(
            rel,
            "pods",
            type_,
            self.obj,
            lat_ms=lat_ms,
            reveals={self.key: reveals} if reveals else None,
        )

    def _set_status(self, **fields: Any) -> None:
        order = (
            "phase",
            "conditions",
            "message",
            "reason",
            "nominatedNodeName",
            "hostIP",
            "hostIPs",
            "podIP",
            "podIPs",
            "startTime",
            "initContainerStatuses",
            "containerStatuses",
            "qosClass",
        )
        merged = {**self.status, **fields}
        merged = {k: v for k, v in merged.items() if v is not None}
        self.obj["status"] = {k: merged[k] for k in order if k in merged}

    def _cond(self, type_, status, at, reason=None, message=None, keep=True):
        old = next((c for c in self.status.get("conditions", []) if c["type"] == type_), None)
        if keep and old and old["status"] == status and old.get("reason") == reason:
            return old
        c = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": ts(at)}
        if reason:
            c["reason"] = reason
        if message:
            c["message"] = message
        return c

    def _cstatus(
        self,
        c: dict[str, Any],
        state: dict[str, Any],
        ready: bool,
        started: bool,
        running_image: bool,
    ) -> dict[str, Any]:
        s: dict[str, Any] = {
            "name": c["name"],
            "state": state,
            "lastState": {},
            "ready": ready,
            "restartCount": 0,
            "image": full_image(c["image"]) if running_image else c["image"],
            "imageID": (
                f"{full_image(c['image']).rsplit(':', 1)[0]}@sha256:{det_hex(64, c['image'])}"
                if running_image
                else ""
            ),
        }
        if running_image:
            s["containerID"] = f"containerd://{det_hex(64, self.uid, c['name'])}"
        s["started"] = started
        if c.get("resources"):
            s["resources"] = c["resources"]
        if self.volume:
            s["volumeMounts"] = [
                {
                    "name": self.volume,
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                    "readOnly": True,
                    "recursiveReadOnly": "Disabled",
                }
            ]
        return s

    def _unready(self) -> str:
        names = " ".join(c["name"] for c in self.containers)
        return f"containers with unready status: [{names}]"

    # -- lifecycle steps
    def create(self, rel: float, **kw) -> int:
        at = self.tr.us(rel)
        self.created_at = at
        self.obj["metadata"]["creationTimestamp"] = ts(at)
        facts: dict[str, int | None] = {"created": floor_s(at)}
        if self.node:
            facts["bound"] = floor_s(at)
        return self._emit(rel, "ADDED", reveals=facts, **kw)

    def unschedulable(self, rel: float, message: str, **kw) -> int:
        at = self.tr.us(rel)
        self._set_status(
            conditions=[self._cond("PodScheduled", "False", at, "Unschedulable", message)]
        )
        return self._emit(rel, **kw)

    def bind(self, rel: float, node: str, **kw) -> int:
        """POST pods/binding: nodeName set and PodScheduled=True, in one write."""
        at = self.tr.us(rel)
        self.obj["spec"]["nodeName"] = node
        conds = [c for c in self.status.get("conditions", []) if c["type"] != "PodScheduled"]
        conds.append(self._cond("PodScheduled", "True", at, keep=False))
        self._set_status(conditions=conds)
        self.obj["spec"] = _ordered(self.obj["spec"], SPEC_ORDER)
        return self._emit(rel, reveals={"bound": floor_s(at)}, **kw)

    def ack(self, rel: float, *, sandbox: bool = False, **kw) -> int:
        """The kubelet's first status write: startTime, hostIP, its conditions."""
        at = self.tr.us(rel)
        node = self.tr.nodes[self.node]
        sched = next(
            (c for c in self.status.get("conditions", []) if c["type"] == "PodScheduled"), None
        )
        conds = [
            self._cond("PodReadyToStartContainers", "True" if sandbox else "False", at),
            self._cond("Initialized", "True", at),
            self._cond("Ready", "False", at, "ContainersNotReady", self._unready()),
            self._cond("ContainersReady", "False", at, "ContainersNotReady", self._unready()),
            sched
            if sched and sched["status"] == "True"
            else self._cond("PodScheduled", "True", at),
        ]
        fields: dict[str, Any] = {
            "conditions": conds,
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "startTime": ts(at),
            "containerStatuses": [
                self._cstatus(c, {"waiting": {"reason": "ContainerCreating"}}, False, False, False)
                for c in self.containers
            ],
        }
        facts: dict[str, int | None] = {
            "kubelet_ack": floor_s(at),
            "admitted": floor_s(at),
            "initialized": floor_s(at),
        }
        if sandbox:
            ip = node.pod_ip()
            fields.update(podIP=ip, podIPs=[{"ip": ip}])
            facts["sandbox_ready"] = floor_s(at)
        self._set_status(**fields)
        return self._emit(rel, reveals=facts, **kw)

    def sandbox(self, rel: float, **kw) -> int:
        at = self.tr.us(rel)
        node = self.tr.nodes[self.node]
        ip = node.pod_ip()
        conds = [
            self._cond("PodReadyToStartContainers", "True", at)
            if c["type"] == "PodReadyToStartContainers"
            else c
            for c in self.status["conditions"]
        ]
        self._set_status(conditions=conds, podIP=ip, podIPs=[{"ip": ip}])
        return self._emit(rel, reveals={"sandbox_ready": floor_s(at)}, **kw)

    def waiting(self, rel: float, reason: str, message: str | None = None, **kw) -> int:
        state: dict[str, Any] = {"reason": reason}
        if message:
            state["message"] = message
        self._set_status(
            containerStatuses=[
                self._cstatus(c, {"waiting": dict(state)}, False, False, False)
                for c in self.containers
            ]
        )
        return self._emit(rel, **kw)

    def run(
        self, rel: float, started: dict[str, float] | None = None, ready: bool = True, **kw
    ) -> int:
        """Phase Running; every container running (startedAt given per container or ``rel``)."""
        at = self.tr.us(rel)
        for c in self.containers:
            self.started[c["name"]] = self.tr.us((started or {}).get(c["name"], rel))
        conds = []
        for c in self.status["conditions"]:
            if c["type"] in ("Ready", "ContainersReady") and ready:
                conds.append(self._cond(c["type"], "True", at))
            else:
                conds.append(c)
        self._set_status(
            phase="Running",
            conditions=conds,
            containerStatuses=[
                self._cstatus(
                    c, {"running": {"startedAt": ts(self.started[c["name"]])}}, ready, True, True
                )
                for c in self.containers
            ],
        )
        facts: dict[str, int | None] = {
            "containers_started": max(floor_s(v) for v in self.started.values()),
            "running": None,
        }
        if ready:
            facts["ready"] = floor_s(at)
        return self._emit(rel, reveals=facts, **kw)

    def terminate(
        self, rel: float, exit_codes: dict[str, int], *, sandbox_gone: bool = True, **kw
    ) -> int:
        """All containers ended; phase Succeeded when every exit code is 0, else Failed."""
        at = self.tr.us(rel)
        ok = all(code == 0 for code in exit_codes.values())
        phase = "Succeeded" if ok else "Failed"
        statuses = []
        for c in self.containers:
            code = exit_codes[c["name"]]
            term = {
                "exitCode": code,
                "reason": "Completed" if code == 0 else "Error",
                "startedAt": ts(self.started[c["name"]]),
                "finishedAt": ts(at),
                "containerID": f"containerd://{det_hex(64, self.uid, c['name'])}",
            }
            statuses.append(self._cstatus(c, {"terminated": term}, False, False, True))
        reason = "PodCompleted" if ok else "PodFailed"
        conds = []
        for c in self.status["conditions"]:
            if c["type"] == "PodReadyToStartContainers" and sandbox_gone:
                conds.append(self._cond(c["type"], "False", at))
            elif c["type"] in ("Ready", "ContainersReady"):
                conds.append(
                    self._cond(c["type"], "False", at, reason, keep=False)
                    if c["status"] == "True" or c.get("reason") != reason
                    else c
                )
            else:
                conds.append(c)
        self._set_status(phase=phase, conditions=conds, containerStatuses=statuses)
        return self._emit(rel, reveals={"finished": None}, **kw)

    def reject(self, rel: float, reason: str, message: str, **kw) -> int:
        """kubelet rejectPod: Failed, reason, "Pod was rejected: ..."; no conditions."""
        at = self.tr.us(rel)
        self.obj["status"] = {
            "phase": "Failed",
            "message": f"Pod was rejected: {message}",
            "reason": reason,
            "startTime": ts(at),
            "qosClass": self.qos,
        }
        return self._emit(rel, reveals={"kubelet_ack": floor_s(at), "rejected": floor_s(at)}, **kw)

    def add_condition(self, rel: float, cond: dict[str, Any], **kw) -> int:
        self._set_status(conditions=[*self.status.get("conditions", []), cond])
        return self._emit(rel, **kw)

    def mark_deleting(self, rel: float, grace: int = 30, **kw) -> int:
        at = self.tr.us(rel)
        self.obj["metadata"]["deletionTimestamp"] = ts(at + grace * SECOND)
        self.obj["metadata"]["deletionGracePeriodSeconds"] = grace
        meta = self.obj["metadata"]
        self.obj["metadata"] = _reorder_meta(meta)
        return self._emit(rel, **kw)

    def delete(self, rel: float, *, stamp: bool = True, **kw) -> int:
        """The final grace-0 delete: DELETED with the last stored copy."""
        at = self.tr.us(rel)
        if stamp and "deletionTimestamp" not in self.obj["metadata"]:
            self.obj["metadata"]["deletionTimestamp"] = ts(at)
        if stamp:
            self.obj["metadata"]["deletionGracePeriodSeconds"] = 0
        self.obj["metadata"] = _reorder_meta(self.obj["metadata"])
        return self._emit(rel, "DELETED", reveals={"deleted": None}, **kw)

    def listed(self, rel_obs: float, facts: dict[str, int | None] | None = None) -> int:
        return self.tr.listed(rel_obs, "pods", self.obj, {self.key: facts} if facts else None)


CONTAINER_ORDER = (
    "name",
    "image",
    "command",
    "args",
    "workingDir",
    "ports",
    "envFrom",
    "env",
    "resources",
    "resizePolicy",
    "restartPolicy",
    "volumeMounts",
    "volumeDevices",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "terminationMessagePath",
    "terminationMessagePolicy",
    "imagePullPolicy",
    "securityContext",
)
SPEC_ORDER = (
    "volumes",
    "initContainers",
    "containers",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeSelector",
    "serviceAccountName",
    "serviceAccount",
    "nodeName",
    "hostNetwork",
    "securityContext",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "priorityClassName",
    "priority",
    "enableServiceLinks",
    "preemptionPolicy",
)


def _ordered(d: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    missing = set(d) - set(order)
    if missing:
        raise ValueError(f"unknown fields {missing}")
    return {k: d[k] for k in order if k in d}


def _reorder_meta(meta: dict[str, Any]) -> dict[str, Any]:
    order = (
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    )
    return {k: meta[k] for k in order if k in meta}


# ---------------------------------------------------------------- events


class EventSim:
    """One Event object. ``recorder``: "legacy" (client-go tools/record: kubelet,
    controllers) or "new" (tools/events: kube-scheduler). ``api``: how the
    watcher reads it: "core" (v1) or "events" (events.k8s.io/v1)."""

    def __init__(
        self,
        tr: Trace,
        rel: float,
        ref: dict[str, Any],
        reason: str,
        message: str,
        *,
        type_: str = "Normal",
        recorder: str = "legacy",
        api: str = "core",
        component: str = "kubelet",
        host: str | None = None,
        action: str | None = None,
        instance: str | None = None,
        namespace: str | None = None,
    ) -> None:
        self.tr = tr
        # MicroTime: the recorder's clock, not a round number of milliseconds.
        self.at = tr.us(rel) + tr.rng.randint(0, 400)
        self.ref = ref
        self.reason = reason
        self.message = message
        self.type = type_
        self.recorder = recorder
        self.api = api
        self.component = component
        self.host = host
        self.action = action
        self.instance = instance
        self.namespace = namespace or ref.get("namespace") or "default"
        self.name = f"{ref['name']}.{self.at * 1000 + tr.rng.randint(0, 999):x}"
        self.uid = det_uid(tr.cluster, "event", self.name, reason)
        self.count = 1
        self.last = self.at
        self.series: dict[str, Any] | None = None
        self.rv = ""

    def render(self) -> dict[str, Any]:
        meta = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "resourceVersion": self.rv,
            "creationTimestamp": ts(self.at),
        }
        legacy = self.recorder == "legacy"
        source = {"component": self.component}
        if self.host:
            source["host"] = self.host
        rc = self.component
        ri = (self.host or "") if legacy else (self.instance or "")
        series = None
        if self.series:
            series = {
                "count": self.series["count"],
                "lastObservedTime": fmt_us(self.series["last"]),
            }
        if self.api == "core":
            ev: dict[str, Any] = {
                "kind": "Event",
                "apiVersion": "v1",
                "metadata": meta,
                "involvedObject": self.ref,
                "reason": self.reason,
                "message": self.message,
                "source": source if legacy else {},
                "firstTimestamp": ts(self.at) if legacy else None,
                "lastTimestamp": ts(self.last) if legacy else None,
            }
            if legacy:
                ev["count"] = self.count
            ev["type"] = self.type
            ev["eventTime"] = None if legacy else fmt_us(self.at)
            if series:
                ev["series"] = series
            if self.action:
                ev["action"] = self.action
            ev["reportingComponent"] = rc
            ev["reportingInstance"] = ri
            return ev
        ev = {
            "kind": "Event",
            "apiVersion": "events.k8s.io/v1",
            "metadata": meta,
            "eventTime": None if legacy else fmt_us(self.at),
        }
        if series:
            ev["series"] = series
        ev["reportingController"] = rc
        ev["reportingInstance"] = ri
        if self.action:
            ev["action"] = self.action
        ev["reason"] = self.reason
        ev["regarding"] = self.ref
        ev["note"] = self.message
        ev["type"] = self.type
        ev["deprecatedSource"] = source if legacy else {}
        ev["deprecatedFirstTimestamp"] = ts(self.at) if legacy else None
        ev["deprecatedLastTimestamp"] = ts(self.last) if legacy else None
        if legacy:
            ev["deprecatedCount"] = self.count
        return ev

    def _emit(self, rel: float, type_: str, lat_ms, reveals, not_before=None) -> int:
        obj = self.render()
        obs = self.tr.emit(
            rel, "events", type_, obj, lat_ms=lat_ms, reveals=reveals, not_before=not_before
        )
        self.rv = obj["metadata"]["resourceVersion"]
        return obs

    def post(
        self, *, lat_ms: float | None = None, reveals=None, not_before: int | None = None
    ) -> int:
        return self._emit((self.at - self.tr.t0) / SECOND, "ADDED", lat_ms, reveals, not_before)

    def repeat(self, rel: float, *, lat_ms: float | None = None) -> int:
        """Legacy recorder: count++ and lastTimestamp (PATCH). New recorder: series."""
        at = self.tr.us(rel) + self.tr.rng.randint(0, 400)
        if self.recorder == "legacy":
            self.count += 1
            self.last = at
        else:
            count = 2 if self.series is None else self.series["count"] + 1
            self.series = {"count": count, "last": at}
        return self._emit((at - self.tr.t0) / SECOND, "MODIFIED", lat_ms, None)

    def snapshot(self) -> dict[str, Any]:
        obj = self.render()
        return obj


def kubelet_event(
    tr: Trace,
    rel: float,
    pod: PodSim,
    reason: str,
    message: str,
    *,
    type_: str = "Normal",
    field: str | None = None,
    api: str = "core",
    ack: bool = True,
    lat_ms: float | None = None,
    post: bool = True,
) -> EventSim:
    ev = EventSim(
        tr,
        rel,
        pod.ref(field),
        reason,
        message,
        type_=type_,
        api=api,
        component="kubelet",
        host=pod.node,
    )
    if post:
        facts = {pod.key: {"kubelet_ack": floor_s(ev.at)}} if ack else None
        ev.post(lat_ms=lat_ms, reveals=facts)
    return ev


def scheduled_event(
    tr: Trace,
    rel: float,
    pod: PodSim,
    node: str,
    *,
    api: str = "events",
    ref: dict[str, Any] | None = None,
    lat_ms: float | None = None,
    after: int | None = None,
) -> EventSim:
    """The scheduler's Scheduled event; ``after``: observed after the binding's MODIFIED."""
    ev = EventSim(
        tr,
        rel,
        ref or pod.ref(),
        "Scheduled",
        f"Successfully assigned {pod.ns}/{pod.name} to {node}",
        recorder="new",
        api=api,
        component="default-scheduler",
        action="Binding",
        instance="default-scheduler-control-plane",
    )
    ev.post(lat_ms=lat_ms, reveals={pod.key: {"bound": ev.at}}, not_before=after)
    return ev


def failed_scheduling(
    tr: Trace,
    rel: float,
    pod: PodSim,
    message: str,
    *,
    api: str = "events",
    lat_ms: float | None = None,
) -> EventSim:
    ev = EventSim(
        tr,
        rel,
        pod.ref(),
        "FailedScheduling",
        message,
        type_="Warning",
        recorder="new",
        api=api,
        component="default-scheduler",
        action="Scheduling",
        instance="default-scheduler-control-plane",
    )
    ev.post(lat_ms=lat_ms)
    return ev


def c_field(pod: PodSim, name: str | None = None) -> str:
    return f"spec.containers{{{name or pod.containers[0]['name']}}}"


def start_containers(
    tr: Trace,
    pod: PodSim,
    rel: float,
    *,
    pulled: str | None = None,
    pull_s: float = 0.0,
    api: str = "core",
    size: int = 20033248,
) -> float:
    """Pulling/Pulled/Created/Started kubelet events per container; returns the last start time."""
    t = rel
    for c in pod.containers:
        image = c["image"]
        f = c_field(pod, c["name"])
        if pull_s:
            kubelet_event(tr, t, pod, "Pulling", f'Pulling image "{image}"', field=f, api=api)
            t += pull_s
            kubelet_event(
                tr,
                t,
                pod,
                "Pulled",
                f'Successfully pulled image "{image}" in {pull_s:.3f}s ({pull_s:.3f}s including waiting).'
                f" Image size: {size} bytes.",
                field=f,
                api=api,
            )
        else:
            kubelet_event(
                tr,
                t,
                pod,
                "Pulled",
                f'Container image "{image}" already present on machine',
                field=f,
                api=api,
            )
        t += 0.041
        kubelet_event(tr, t, pod, "Created", f"Created container: {c['name']}", field=f, api=api)
        t += 0.187
        kubelet_event(tr, t, pod, "Started", f"Started container {c['name']}", field=f, api=api)
        t += 0.012
    return t


def bookmark(
    tr: Trace,
    rel_obs: float,
    kind: str = "Pod",
    api: str = "v1",
    annotations: dict[str, str] | None = None,
    stream: str = "pods",
) -> None:
    meta: dict[str, Any] = {"resourceVersion": str(tr.rv), "creationTimestamp": None}
    if annotations:
        meta["annotations"] = annotations
    obj: dict[str, Any] = {"kind": kind, "apiVersion": api, "metadata": meta}
    if kind == "Pod":
        obj["spec"] = {"containers": None}
        obj["status"] = {}
    tr.replay(rel_obs, stream, "BOOKMARK", obj)


def expired(tr: Trace, rel_obs: float, old_rv: int, stream: str = "pods") -> None:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {old_rv} ({tr.rv - 40})",
        "reason": "Expired",
        "code": 410,
    }
    tr.replay(rel_obs, stream, "ERROR", status)


def cluster_nodes(tr: Trace, names=("worker-1", "worker-3"), **kw) -> dict[str, NodeSim]:
    cp = NodeSim(
        tr,
        "control-plane",
        1,
        control_plane=True,
        taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
    )
    out = {"control-plane": cp}
    for i, name in enumerate(names):
        out[name] = NodeSim(tr, name, 2 + i, **kw.get(name, {}))
    for n in out.values():
        n.list(0.0)
    return out


def rs_owner(tr: Trace, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": name,
        "uid": det_uid(tr.cluster, "rs", name),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def rs_pod(tr: Trace, ns: str, rs: str, app: str, hash_: str, containers, **kw) -> PodSim:
    name = f"{rs}-{det_suffix(5, tr.cluster, rs, kw.pop('salt', ''))}"
    return PodSim(
        tr,
        ns,
        name,
        containers,
        generate_name=f"{rs}-",
        owner=rs_owner(tr, rs),
        labels={"app": app, "pod-template-hash": hash_},
        **kw,
    )


NGINX = "nginx:1.27.3"

# ---------------------------------------------------------------- scenarios
TRACES: list[Trace] = []
ABOUT: dict[str, str] = {}


def trace(file: str, cluster: str, start_min: int, about: str) -> Trace:
    tr = Trace(file, cluster, start_min, 48211 + start_min * 997, about)
    TRACES.append(tr)
    return tr


def normal_pod_run(
    tr: Trace,
    pod: PodSim,
    rel: float,
    node: str,
    *,
    sched_api="events",
    event_api="core",
    pull_s=1.4,
) -> float:
    """Scheduler binds at rel; kubelet acks, sandbox, pulls, starts; returns when Running."""
    obs = pod.bind(rel, node)
    scheduled_event(tr, rel + 0.004, pod, node, api=sched_api, after=obs)
    pod.ack(rel + 0.062)
    pod.sandbox(rel + 0.94)
    t = start_containers(tr, pod, rel + 1.02, pull_s=pull_s, api=event_api)
    pod.run(t + 0.35, started={c["name"]: t - 0.01 for c in pod.containers})
    return t + 0.35


def s01_scheduled_running() -> None:
    tr = trace(
        "scheduled-running.jsonl",
        "kind-handoff",
        0,
        "Normal scheduler path: Scheduled (events.k8s.io/v1), kubelet Pulling/Pulled/Created/"
        "Started (core/v1), two pods on two nodes, both Running.",
    )
    cluster_nodes(tr)
    web = rs_pod(
        tr,
        "default",
        "web-6c9f8b7d5",
        "web",
        "6c9f8b7d5",
        [container("nginx", NGINX, requests={"cpu": "100m", "memory": "64Mi"}, ports=[80])],
    )
    web.create(1.214)
    api = PodSim(
        tr,
        "shop",
        "cart-api",
        [
            container(
                "api",
                "ghcr.io/example/cart-api:2.8.1",
                requests={"cpu": "250m", "memory": "256Mi"},
                limits={"cpu": "250m", "memory": "256Mi"},
                ports=[8080],
            ),
            container(
                "envoy",
                "envoyproxy/envoy:v1.32.3",
                requests={"cpu": "50m", "memory": "64Mi"},
                limits={"cpu": "50m", "memory": "64Mi"},
            ),
        ],
        labels={"app": "cart-api"},
    )
    normal_pod_run(tr, web, 1.236, "worker-1", pull_s=1.433)
    api.create(6.150)
    normal_pod_run(tr, api, 6.180, "worker-3", pull_s=2.871)
    keys = (
        "created",
        "bound",
        "kubelet_ack",
        "admitted",
        "sandbox_ready",
        "initialized",
        "running",
        "ready",
        "rejected",
        "finished",
        "deleted",
    )
    tr.expect(web, "running", "scheduler", reason=None, milestones=keys)
    tr.expect(api, "running", "scheduler", reason=None, milestones=keys)


def s02_core_events() -> None:
    tr = trace(
        "scheduled-running-core-events.jsonl",
        "kind-handoff",
        10,
        "Scheduler path with every Event in core/v1 shape (the scheduler's events read "
        "through v1: empty source, firstTimestamp null, eventTime set). The kubelet's "
        "Pulling event is observed before the Pod MODIFIED with its first status "
        "(startTime), and Started before the Pod shows Running.",
    )
    cluster_nodes(tr)
    pod = PodSim(
        tr,
        "default",
        "checkout",
        [
            container(
                "checkout",
                "ghcr.io/example/checkout:1.4.0",
                requests={"cpu": "200m", "memory": "128Mi"},
                ports=[8080],
            )
        ],
        labels={"app": "checkout"},
    )
    pod.create(0.702)
    obs = pod.bind(0.731, "worker-3")
    scheduled_event(tr, 0.735, pod, "worker-3", api="core", after=obs)
    # The kubelet's first status write is slow to reach the watch (status manager
    # queue, apiserver under load); its Pulling event, emitted later, is seen first.
    # startTime (10:10:00) then proves the kubelet had it within that second, before
    # the Pulling event: kubelet_ack is that coarse second, on purpose.
    tr.allow_late = True
    pod.ack(0.790, lat_ms=900)
    kubelet_event(
        tr,
        1.402,
        pod,
        "Pulling",
        'Pulling image "ghcr.io/example/checkout:1.4.0"',
        field=c_field(pod),
        lat_ms=8,
    )
    pod.sandbox(1.405, lat_ms=30)
    kubelet_event(
        tr,
        4.011,
        pod,
        "Pulled",
        'Successfully pulled image "ghcr.io/example/checkout:1.4.0" in 2.609s '
        "(2.609s including waiting). Image size: 48311022 bytes.",
        field=c_field(pod),
    )
    kubelet_event(tr, 4.050, pod, "Created", "Created container: checkout", field=c_field(pod))
    kubelet_event(
        tr, 4.236, pod, "Started", "Started container checkout", field=c_field(pod), lat_ms=9
    )
    pod.run(4.240, started={"checkout": 4.23}, lat_ms=420)
    tr.expect(
        pod,
        "running",
        "scheduler",
        reason=None,
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "sandbox_ready",
            "running",
            "ready",
            "deleted",
        ),
    )


def s03_unscheduled() -> None:
    tr = trace(
        "unscheduled.jsonl",
        "kind-handoff",
        20,
        "Three pods the scheduler cannot place: FailedScheduling with the real message "
        "format, PodScheduled=False/Unschedulable, repeats as events.k8s.io series "
        "(MODIFIED, series.count 2), as the core/v1 read of a series, and as a legacy "
        "core/v1 count++ from a secondary scheduler (batch-scheduler).",
    )
    cluster_nodes(tr)
    big = PodSim(
        tr,
        "analytics",
        "big-batch",
        [container("spark", "apache/spark:3.5.4", requests={"cpu": "8", "memory": "4Gi"})],
        labels={"app": "big-batch"},
    )
    msg_big = (
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu. preemption: 0/3 nodes "
        "are available: 1 Preemption is not helpful for scheduling, 2 No preemption victims "
        "found for incoming pod."
    )
    big.create(0.811)
    ev_big = failed_scheduling(tr, 0.829, big, msg_big, api="events")
    big.unschedulable(0.832, msg_big)

    rep = PodSim(
        tr,
        "reports",
        "reports-0",
        [
            container(
                "renderer",
                "ghcr.io/example/report-renderer:0.9.2",
                requests={"cpu": "500m", "memory": "512Mi"},
            )
        ],
        labels={"app": "reports"},
        node_selector={"dedicated": "reports"},
    )
    msg_rep = (
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 2 node(s) didn't match Pod's node "
        "affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful "
        "for scheduling."
    )
    rep.create(3.120)
    ev_rep = failed_scheduling(tr, 3.131, rep, msg_rep, api="core")
    rep.unschedulable(3.134, msg_rep)

    etl = PodSim(
        tr,
        "analytics",
        "nightly-etl",
        [container("etl", "ghcr.io/example/etl:5.0.0", requests={"cpu": "6", "memory": "24Gi"})],
        labels={"app": "nightly-etl"},
        scheduler="batch-scheduler",
    )
    msg_etl = (
        "0/3 nodes are available: 1 node(s) had untolerated taint "
        "{node-role.kubernetes.io/control-plane: }, 2 Insufficient cpu, 2 Insufficient memory. "
        "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    etl.create(5.402)
    ev_etl = EventSim(
        tr,
        5.418,
        etl.ref(),
        "FailedScheduling",
        msg_etl,
        type_="Warning",
        recorder="legacy",
        api="core",
        component="batch-scheduler",
    )
    ev_etl.post()
    etl.unschedulable(5.421, msg_etl)

    # A node update moves the unschedulable pods back to the active queue: retried, same verdict.
    tr.nodes["worker-1"].obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = "zone-a"
    tr.nodes["worker-1"].modified(30.077)
    ev_big.repeat(30.094)
    ev_rep.repeat(30.101)
    ev_etl.repeat(30.120)
    ev_etl.repeat(61.305)
    # New recorder: later repeats only update its cache (sent every 30 min), nothing on the wire.
    kw = {"milestones": ("created", "bound", "kubelet_ack", "running", "deleted")}
    tr.expect(big, "unscheduled", None, reason="Unschedulable", **kw)
    tr.expect(rep, "unscheduled", None, reason="Unschedulable", **kw)
    tr.expect(etl, "unscheduled", None, reason="Unschedulable", **kw)


def background_running(tr: Trace, rel: float, node: str, name: str) -> PodSim:
    pod = rs_pod(
        tr,
        "default",
        f"{name}-5d8f7c9b6",
        name,
        "5d8f7c9b6",
        [container(name, NGINX, requests={"cpu": "50m", "memory": "32Mi"})],
        salt=name,
    )
    pod.create(rel)
    normal_pod_run(tr, pod, rel + 0.021, node, pull_s=0)
    return pod


def s04_awaiting_kubelet() -> None:
    tr = trace(
        "awaiting-kubelet.jsonl",
        "kind-handoff",
        30,
        "A pod bound 20 s before the end of the trace, its node Ready, no sign of the "
        "kubelet yet. Another pod runs normally meanwhile and ends the trace.",
    )
    cluster_nodes(tr)
    other = background_running(tr, 2.0, "worker-1", "frontend")
    pod = PodSim(
        tr,
        "default",
        "api-7",
        [
            container(
                "api", "ghcr.io/example/api:7.0.2", requests={"cpu": "100m", "memory": "128Mi"}
            )
        ],
        labels={"app": "api"},
    )
    pod.create(14.902)
    obs = pod.bind(14.930, "worker-3")
    scheduled_event(tr, 14.933, pod, "worker-3", after=obs)
    late = background_running(tr, 31.5, "worker-1", "metrics")
    kubelet_event(
        tr,
        34.92,
        late,
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        type_="Warning",
        field=c_field(late),
    )
    tr.expect(
        pod,
        "awaiting-kubelet",
        "scheduler",
        milestones=("created", "bound", "kubelet_ack", "admitted", "running", "deleted"),
    )
    tr.expect(other, "running", "scheduler", reason=None, milestones=("running",))


def s05_stuck_kubelet_silent() -> None:
    tr = trace(
        "stuck-kubelet-silent.jsonl",
        "kind-handoff",
        40,
        "Bound 90 s before the end to worker-3, which exists and stays Ready, but the "
        "kubelet never writes status or an event for the pod (e.g. a wedged pod worker).",
    )
    cluster_nodes(tr)
    pod = rs_pod(
        tr,
        "ingest",
        "ingest-7f6d5c4b3",
        "ingest",
        "7f6d5c4b3",
        [
            container(
                "ingest",
                "ghcr.io/example/ingest:3.2.0",
                requests={"cpu": "300m", "memory": "256Mi"},
            )
        ],
    )
    pod.create(3.310)
    obs = pod.bind(3.338, "worker-3")
    scheduled_event(tr, 3.342, pod, "worker-3", after=obs)
    other = background_running(tr, 45.0, "worker-1", "search")
    kubelet_event(
        tr,
        93.5,
        other,
        "Unhealthy",
        'Liveness probe failed: Get "http://10.244.2.6:80/healthz": '
        "context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
        type_="Warning",
        field=c_field(other),
    )
    tr.expect(
        pod,
        "stuck",
        "scheduler",
        reason="kubelet-silent",
        milestones=("created", "bound", "kubelet_ack", "admitted", "running", "deleted"),
    )


def s06_stuck_image_pull() -> None:
    tr = trace(
        "stuck-image-pull.jsonl",
        "kind-handoff",
        50,
        "Kubelet admitted the pod, sandbox ready, image pull fails: ErrImagePull then "
        "ImagePullBackOff; Failed/BackOff/Pulling events repeat (core/v1 count++). Ends "
        "95 s after binding, in ImagePullBackOff.",
    )
    cluster_nodes(tr)
    image = "registry.example.com/payments/worker:v2.3.9"
    pod = PodSim(
        tr,
        "payments",
        "payments-worker",
        [container("worker", image, requests={"cpu": "200m", "memory": "256Mi"})],
        labels={"app": "payments-worker"},
    )
    pod.create(1.100)
    obs = pod.bind(1.124, "worker-1")
    scheduled_event(tr, 1.127, pod, "worker-1", after=obs)
    pod.ack(1.180)
    pod.sandbox(2.021)
    f = c_field(pod)
    err = (
        f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
        f"{image}: not found"
    )
    pulling = kubelet_event(tr, 2.090, pod, "Pulling", f'Pulling image "{image}"', field=f)
    failed = kubelet_event(
        tr,
        2.611,
        pod,
        "Failed",
        f'Failed to pull image "{image}": rpc error: code = NotFound desc = {err}',
        type_="Warning",
        field=f,
    )
    err_pull = kubelet_event(
        tr, 2.612, pod, "Failed", "Error: ErrImagePull", type_="Warning", field=f
    )
    pod.waiting(2.640, "ErrImagePull", f"rpc error: code = NotFound desc = {err}")
    backoff = kubelet_event(tr, 3.402, pod, "BackOff", f'Back-off pulling image "{image}"', field=f)
    err_back = kubelet_event(
        tr, 3.403, pod, "Failed", "Error: ImagePullBackOff", type_="Warning", field=f
    )
    bo_msg = (
        f'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = {err}'
    )
    pod.waiting(3.430, "ImagePullBackOff", bo_msg)
    t = 3.4
    for delay in (10, 20, 40):
        t += delay
        pulling.repeat(t + 0.5)
        failed.repeat(t + 1.0)
        err_pull.repeat(t + 1.001)
        pod.waiting(t + 1.03, "ErrImagePull", f"rpc error: code = NotFound desc = {err}")
        backoff.repeat(t + 1.9)
        err_back.repeat(t + 1.901)
        pod.waiting(t + 1.93, "ImagePullBackOff", bo_msg)
    backoff.repeat(96.2)
    err_back.repeat(96.201)
    tr.expect(
        pod,
        "stuck",
        "scheduler",
        reason="ImagePullBackOff",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "admitted",
            "sandbox_ready",
            "running",
            "ready",
            "deleted",
        ),
    )


def s07_starting() -> None:
    tr = trace(
        "starting.jsonl",
        "kind-handoff",
        60,
        "Admitted, sandbox ready, still pulling a large image (ContainerCreating) 25 s "
        "after binding. The watcher reads Events through events.k8s.io/v1 here, so the "
        "kubelet's events have deprecatedSource/deprecatedCount and eventTime null.",
    )
    cluster_nodes(tr)
    image = "nvcr.io/nvidia/pytorch:25.01-py3"
    pod = PodSim(
        tr,
        "ml",
        "trainer-0",
        [container("trainer", image, requests={"cpu": "1", "memory": "2Gi"})],
        labels={"app": "trainer"},
    )
    pod.create(0.400)
    obs = pod.bind(0.427, "worker-3")
    scheduled_event(tr, 0.431, pod, "worker-3", api="events", after=obs)
    pod.ack(0.488)
    pod.sandbox(1.310)
    kubelet_event(
        tr, 1.377, pod, "Pulling", f'Pulling image "{image}"', field=c_field(pod), api="events"
    )
    other = background_running(tr, 12.0, "worker-1", "docs")
    kubelet_event(
        tr,
        25.43,
        other,
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 500",
        type_="Warning",
        field=c_field(other),
        api="events",
    )
    tr.expect(
        pod,
        "starting",
        "scheduler",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "admitted",
            "sandbox_ready",
            "running",
            "ready",
            "deleted",
        ),
    )


def rejected_trace(file: str, start: int, about: str, pods: list[tuple], extra=None) -> Trace:
    tr = trace(file, "kind-manual", start, about)
    cluster_nodes(tr, names=("worker-1", "worker-3"))
    if extra:
        extra(tr)
    for name, cont, kw, rel, reason, message in pods:
        pod = PodSim(tr, "default", name, [cont], node="worker-1", **kw)
        pod.create(rel)
        ev = EventSim(
            tr,
            rel + 0.034,
            pod.ref(),
            reason,
            message,
            type_="Warning",
            component="kubelet",
            host="worker-1",
        )
        pod.reject(rel + 0.031, reason, message, lat_ms=7)
        ev.post(lat_ms=38, reveals={pod.key: {"kubelet_ack": floor_s(ev.at)}})
        tr.expect(
            pod,
            "rejected",
            "manual",
            reason=reason,
            milestones=(
                "created",
                "bound",
                "kubelet_ack",
                "rejected",
                "admitted",
                "sandbox_ready",
                "running",
                "ready",
                "deleted",
            ),
        )
    return tr


def s08_rejections() -> None:
    rejected_trace(
        "rejected-outofcpu.jsonl",
        70,
        "Seed 003's bigcpu: nodeName worker-1, requests 100 CPUs; kubelet admission rejects it "
        "(phase Failed, reason OutOfcpu, message 'Pod was rejected: ...', startTime, no "
        "conditions) and records a Warning OutOfcpu event.",
        [
            (
                "bigcpu",
                container("stress", "polinux/stress:1.0.4", requests={"cpu": "100"}),
                {},
                2.031,
                "OutOfcpu",
                "Node didn't have enough resource: cpu, requested: 100000, used: 950, capacity: 4000",
            )
        ],
    )
    rejected_trace(
        "rejected-outofmemory.jsonl",
        80,
        "Seed 003's bigmem: nodeName worker-1, requests 64Gi memory on a 16Gi node: OutOfmemory.",
        [
            (
                "bigmem",
                container("stress", "polinux/stress:1.0.4", requests={"memory": "64Gi"}),
                {},
                2.344,
                "OutOfmemory",
                "Node didn't have enough resource: memory, requested: 68719476736, used: "
                "283115520, capacity: 16758124544",
            )
        ],
    )
    rejected_trace(
        "rejected-nodeaffinity.jsonl",
        90,
        "Seed 003's badsel: nodeName worker-1 plus nodeSelector disktype=ssd that worker-1 "
        "lacks: kubelet rejects with NodeAffinity.",
        [
            (
                "badsel",
                container("nginx", NGINX),
                {"node_selector": {"disktype": "ssd"}},
                1.872,
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
            )
        ],
    )

    def small_node(tr: Trace) -> None:
        edge = NodeSim(
            tr,
            "edge-1",
            9,
            cpu="2",
            memory_ki=3969852,
            pods="8",
            labels={"node-role.kubernetes.io/edge": ""},
        )
        edge.list(0.0)

    tr = trace(
        "rejected-outofpods.jsonl",
        "kind-edge",
        100,
        "An edge node with maxPods 8 already running 8 pods; a pod pinned to it with "
        "nodeName is rejected: OutOfpods.",
    )
    cluster_nodes(tr)
    small_node(tr)
    pod = PodSim(
        tr,
        "edge",
        "camera-probe",
        [container("probe", "busybox:1.37", command=["sleep", "3600"])],
        node="edge-1",
    )
    pod.create(1.510)
    msg = "Node didn't have enough resource: pods, requested: 1, used: 8, capacity: 8"
    ev = EventSim(tr, 1.546, pod.ref(), "OutOfpods", msg, type_="Warning", host="edge-1")
    pod.reject(1.544, "OutOfpods", msg, lat_ms=6)
    ev.post(lat_ms=35, reveals={pod.key: {"kubelet_ack": floor_s(ev.at)}})
    tr.expect(
        pod,
        "rejected",
        "manual",
        reason="OutOfpods",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "rejected",
            "admitted",
            "running",
            "deleted",
        ),
    )

    tr = trace(
        "rejected-tainttoleration.jsonl",
        "kind-manual",
        110,
        "worker-1 carries a NoExecute taint dedicated=reports; a pod pinned there with "
        "nodeName and no toleration is refused at kubelet admission: TaintToleration.",
    )
    cluster_nodes(tr)
    tr.nodes["worker-1"].add_taint(
        0.5, {"key": "dedicated", "value": "reports", "effect": "NoExecute"}
    )
    pod = PodSim(
        tr,
        "default",
        "pinned-report",
        [container("report", "busybox:1.37", command=["sleep", "3600"])],
        node="worker-1",
    )
    pod.create(40.200)
    ev = EventSim(
        tr,
        40.229,
        pod.ref(),
        "TaintToleration",
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
        type_="Warning",
        host="worker-1",
    )
    pod.reject(
        40.227,
        "TaintToleration",
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
        lat_ms=9,
    )
    ev.post(lat_ms=31, reveals={pod.key: {"kubelet_ack": floor_s(ev.at)}})
    tr.expect(
        pod,
        "rejected",
        "manual",
        reason="TaintToleration",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "rejected",
            "admitted",
            "running",
            "deleted",
        ),
    )

    tr = trace(
        "rejected-scheduler-race.jsonl",
        "kind-handoff",
        120,
        "The scheduler binds api-5 (1500m CPU) to worker-1 while a pod pinned there by "
        "nodeName (batch-pinned, 2 CPUs) is being admitted, which the scheduler's cache "
        "had not counted yet. The kubelet admits batch-pinned and rejects api-5 with "
        "OutOfcpu (event observed before the pod status). Its ReplicaSet replaces it; the "
        "replacement lands on worker-3 and runs.",
    )
    cluster_nodes(tr)
    api = rs_pod(
        tr,
        "default",
        "api-54d8c7f9b6",
        "api",
        "54d8c7f9b6",
        [
            container(
                "api", "ghcr.io/example/api:5.1.0", requests={"cpu": "1500m", "memory": "512Mi"}
            )
        ],
        salt="first",
    )
    api.create(1.000)
    batch = PodSim(
        tr,
        "default",
        "batch-pinned",
        [container("batch", "ghcr.io/example/batch:1.0.3", requests={"cpu": "2", "memory": "1Gi"})],
        node="worker-1",
    )
    batch.create(1.009)
    obs = api.bind(1.023, "worker-1")
    scheduled_event(tr, 1.026, api, "worker-1", after=obs)
    batch.ack(1.060)
    msg = "Node didn't have enough resource: cpu, requested: 1500, used: 3150, capacity: 4000"
    ev = EventSim(tr, 1.091, api.ref(), "OutOfcpu", msg, type_="Warning", host="worker-1")
    ev.post(lat_ms=7, reveals={api.key: {"kubelet_ack": floor_s(ev.at)}})
    api.reject(1.094, "OutOfcpu", msg, lat_ms=45)
    batch.sandbox(1.850)
    t = start_containers(tr, batch, 1.92, pull_s=0)
    batch.run(t + 0.2, started={"batch": t})
    repl = rs_pod(
        tr,
        "default",
        "api-54d8c7f9b6",
        "api",
        "54d8c7f9b6",
        [
            container(
                "api", "ghcr.io/example/api:5.1.0", requests={"cpu": "1500m", "memory": "512Mi"}
            )
        ],
        salt="second",
    )
    repl.create(t + 0.4)
    normal_pod_run(tr, repl, t + 0.43, "worker-3", pull_s=3.2)
    tr.expect(
        api,
        "rejected",
        "scheduler",
        reason="OutOfcpu",
        milestones=("created", "bound", "kubelet_ack", "admitted", "running", "deleted"),
    )
    tr.expect(batch, "running", "manual", reason=None, milestones=("created", "bound", "running"))
    tr.expect(repl, "running", "scheduler", reason=None, milestones=("created", "bound", "running"))


def ghost(tr: Trace, name: str, rel: float) -> PodSim:
    pod = PodSim(
        tr,
        "default",
        name,
        [container("nginx", "nginx:1.27.3-alpine")],
        node="worker-2",
        annotations={
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"annotations": {}, "name": name, "namespace": "default"},
                    "spec": {
                        "containers": [{"image": "nginx:1.27.3-alpine", "name": "nginx"}],
                        "nodeName": "worker-2",
                    },
                },
                separators=(",", ":"),
            )
            + "\n"
        },
    )
    pod.create(rel)
    return pod


def s09_podgc() -> None:
    tr = trace(
        "podgc-new-style.jsonl",
        "kind-manual",
        130,
        "Seed 003's typo: nodeName worker-2 where the nodes are worker-1/worker-3. Pending, "
        "no events; 73 s later PodGC marks it Failed with DisruptionTarget "
        "DeletionByPodGC ('PodGC: node no longer exists') and deletes it with grace 0.",
    )
    cluster_nodes(tr)
    pod = ghost(tr, "ghost3", 2.118)
    background_running(tr, 20.0, "worker-1", "status")
    at = tr.us(75.402)
    pod.obj["status"]["phase"] = "Failed"
    pod.add_condition(
        75.402,
        {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": ts(at),
            "reason": "DeletionByPodGC",
            "message": "PodGC: node no longer exists",
        },
        reveals={"finished": None},
    )
    pod.delete(75.417)
    tr.expect(
        pod,
        "podgc-deleted",
        "manual",
        reason="orphaned",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "admitted",
            "running",
            "finished",
            "deleted",
        ),
    )

    tr = trace(
        "podgc-old-style.jsonl",
        "kind-manual-old",
        140,
        "Same typo with an older controller-manager: PodGC deletes with grace 0 and no "
        "status patch, so the only sign is a DELETED carrying the Pending pod (no "
        "condition, no deletionTimestamp).",
    )
    cluster_nodes(tr)
    pod = ghost(tr, "ghost4", 5.733)
    background_running(tr, 30.0, "worker-3", "status")
    pod.delete(63.104, stamp=False)
    tr.expect(
        pod,
        "podgc-deleted",
        "manual",
        reason="orphaned",
        milestones=("created", "bound", "kubelet_ack", "admitted", "running", "deleted"),
    )

    tr = trace(
        "stuck-node-missing.jsonl",
        "kind-manual",
        150,
        "Same typo, evaluated at 65 s after creation (expected 'at'), before PodGC's "
        "deletion: stuck, node-missing.",
    )
    cluster_nodes(tr)
    pod = ghost(tr, "ghost5", 1.250)
    background_running(tr, 25.0, "worker-1", "status")
    tr.at = tr.us(66.250)
    tr.expect(
        pod,
        "stuck",
        "manual",
        reason="node-missing",
        milestones=("created", "bound", "kubelet_ack", "running", "deleted"),
    )


def s12_evicted() -> None:
    tr = trace(
        "evicted-noexecute.jsonl",
        "kind-manual",
        160,
        "diag runs pinned to worker-1 (nodeName); an admin taints worker-1 "
        "maintenance=true:NoExecute; the taint-eviction-controller emits TaintManagerEviction, "
        "adds DisruptionTarget DeletionByTaintManager and deletes with the default grace "
        "period (Killing, terminal phase, DELETED). On worker-3 the kubelet evicts "
        "log-writer under ephemeral-storage pressure (phase Failed, reason Evicted).",
    )
    cluster_nodes(tr)
    diag = PodSim(
        tr,
        "default",
        "diag",
        [container("diag", "nicolaka/netshoot:v0.13", command=["sleep", "infinity"])],
        node="worker-1",
    )
    diag.create(1.010)
    diag.ack(1.048)
    diag.sandbox(1.702)
    t = start_containers(tr, diag, 1.76, pull_s=0)
    diag.run(t + 0.3, started={"diag": t})
    writer = PodSim(
        tr,
        "logging",
        "log-writer",
        [
            container(
                "writer",
                "busybox:1.37",
                command=[
                    "sh",
                    "-c",
                    "while true; do head -c 100M /dev/urandom > /tmp/$(date +%s); done",
                ],
            )
        ],
        labels={"app": "log-writer"},
    )
    writer.create(3.0)
    normal_pod_run(tr, writer, 3.02, "worker-3", pull_s=0)

    # worker-3: DiskPressure, kubelet evicts the pod that uses the most ephemeral storage.
    n3 = tr.nodes["worker-3"]
    for cond in n3.obj["status"]["conditions"]:
        if cond["type"] == "DiskPressure":
            cond.update(
                status="True",
                lastHeartbeatTime=ts(tr.us(40.0)),
                lastTransitionTime=ts(tr.us(40.0)),
                reason="KubeletHasDiskPressure",
                message="kubelet has disk pressure",
            )
    n3.modified(40.0)
    n3.add_taint(
        40.3,
        {
            "key": "node.kubernetes.io/disk-pressure",
            "effect": "NoSchedule",
            "timeAdded": ts(tr.us(40.3)),
        },
    )
    ev_msg = (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10263061Ki, "
        "available: 9912544Ki. Container writer was using 6521340Ki, request is 0, has larger "
        "consumption of ephemeral-storage. "
    )
    kubelet_event(tr, 41.2, writer, "Evicted", ev_msg, type_="Warning")
    kubelet_event(tr, 41.21, writer, "Killing", "Stopping container writer", field=c_field(writer))
    at = tr.us(41.9)
    writer.obj["status"]["message"] = ev_msg
    writer.obj["status"]["reason"] = "Evicted"
    writer._set_status()
    writer._set_status(
        conditions=writer.status["conditions"]
        + [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts(at),
                "reason": "TerminationByKubelet",
                "message": ev_msg,
            }
        ]
    )
    writer.terminate(41.9, {"writer": 137})

    # worker-1: NoExecute taint by an admin; diag has no matching toleration.
    tr.nodes["worker-1"].add_taint(
        60.5, {"key": "maintenance", "value": "true", "effect": "NoExecute"}
    )
    ev = EventSim(
        tr,
        60.531,
        diag.ref(),
        "TaintManagerEviction",
        "Marking for deletion Pod default/diag",
        component="taint-eviction-controller",
    )
    ev.post()
    at = tr.us(60.536)
    diag.add_condition(
        60.536,
        {
            "type": "DisruptionTarget",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": ts(at),
            "reason": "DeletionByTaintManager",
            "message": "Taint manager: deleting due to NoExecute taint",
        },
    )
    diag.mark_deleting(60.548, 30)
    kubelet_event(tr, 60.571, diag, "Killing", "Stopping container diag", field=c_field(diag))
    # sleep as PID 1 ignores SIGTERM: SIGKILL when the 30 s grace period ends.
    diag.terminate(90.610, {"diag": 137})
    diag.delete(90.672)
    tr.expect(
        diag,
        "evicted",
        "manual",
        milestones=("created", "bound", "kubelet_ack", "running", "ready", "finished", "deleted"),
    )
    tr.expect(
        writer,
        "evicted",
        "scheduler",
        reason="Evicted",
        milestones=("created", "bound", "running", "finished", "deleted"),
    )


def s13_node_lost() -> None:
    tr = trace(
        "node-lost.jsonl",
        "kind-handoff",
        170,
        "worker-3's kubelet dies at D=45 s (its Lease stops). ingest-0 had been acknowledged "
        "just before (ContainerCreating); report-gen-1 is bound 6 s later, never seen by "
        "a kubelet. At D+50 s (grace 50 s) the node lifecycle controller sets Ready=Unknown "
        "(NodeStatusUnknown, 'Kubelet stopped posting node status.'), emits NodeNotReady "
        "on the Node, taints it unreachable (NoExecute, NoSchedule). Only web-old, which "
        "was Ready, gets Ready=False and a pod NodeNotReady event (MarkPodsNotReady only "
        "touches pods whose Ready condition changes). Trace ends at D+75 s, before the "
        "300 s toleration expires.",
    )
    cluster_nodes(tr)
    D = 45.0  # the kubelet on worker-3 dies here
    old = rs_pod(
        tr,
        "default",
        "web-old-7b8c9d6f5",
        "web-old",
        "7b8c9d6f5",
        [container("nginx", NGINX, requests={"cpu": "50m"})],
    )
    old.create(1.0)
    normal_pod_run(tr, old, 1.03, "worker-3", pull_s=0)
    ingest = PodSim(
        tr,
        "data",
        "ingest-0",
        [
            container(
                "ingest", "ghcr.io/example/ingest:4.0.0", requests={"cpu": "500m", "memory": "1Gi"}
            )
        ],
        owner={
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "ingest",
            "uid": det_uid(tr.cluster, "sts", "ingest"),
            "controller": True,
            "blockOwnerDeletion": True,
        },
        labels={
            "app": "ingest",
            "apps.kubernetes.io/pod-index": "0",
            "statefulset.kubernetes.io/pod-name": "ingest-0",
        },
        extra_spec={"hostname": "ingest-0", "subdomain": "ingest"},
    )
    ingest.create(D - 3.2)
    obs = ingest.bind(D - 3.17, "worker-3")
    scheduled_event(tr, D - 3.166, ingest, "worker-3", after=obs)
    ingest.ack(D - 3.11)
    ingest.sandbox(D - 2.2)
    kubelet_event(
        tr,
        D - 2.12,
        ingest,
        "Pulling",
        'Pulling image "ghcr.io/example/ingest:4.0.0"',
        field=c_field(ingest),
    )
    rep = PodSim(
        tr,
        "reports",
        "report-gen-1",
        [
            container(
                "gen",
                "ghcr.io/example/report-gen:1.1.0",
                requests={"cpu": "250m", "memory": "256Mi"},
            )
        ],
        labels={"app": "report-gen"},
    )
    rep.create(D + 6.01)
    obs = rep.bind(D + 6.04, "worker-3")
    scheduled_event(tr, D + 6.043, rep, "worker-3", after=obs)
    n3 = tr.nodes["worker-3"]
    n3.go_unknown(D + 50.12)
    EventSim(
        tr,
        D + 50.125,
        {"kind": "Node", "name": "worker-3", "uid": n3.obj["metadata"]["uid"], "apiVersion": "v1"},
        "NodeNotReady",
        "Node worker-3 status is now: NodeNotReady",
        component="node-controller",
        namespace="default",
    ).post()
    n3.add_taint(
        D + 50.131,
        {
            "key": "node.kubernetes.io/unreachable",
            "effect": "NoExecute",
            "timeAdded": ts(tr.us(D + 50.131)),
        },
    )
    n3.obj["spec"]["taints"].insert(
        0,
        {
            "key": "node.kubernetes.io/unreachable",
            "effect": "NoSchedule",
            "timeAdded": ts(tr.us(D + 50.18)),
        },
    )
    n3.modified(D + 50.18)
    at = tr.us(D + 50.22)
    old._set_status(
        conditions=[
            old._cond(c["type"], "False", at, keep=False) if c["type"] == "Ready" else c
            for c in old.status["conditions"]
        ]
    )
    old._emit(D + 50.22)
    EventSim(
        tr,
        D + 50.231,
        old.ref(),
        "NodeNotReady",
        "Node is not ready",
        type_="Warning",
        component="node-controller",
    ).post()
    background_running(tr, D + 74, "worker-1", "status")
    tr.expect(
        ingest,
        "node-lost",
        "scheduler",
        milestones=("created", "bound", "kubelet_ack", "sandbox_ready", "running", "deleted"),
    )
    tr.expect(
        rep,
        "node-lost",
        "scheduler",
        milestones=("created", "bound", "kubelet_ack", "admitted", "running", "deleted"),
    )


def s14_failed() -> None:
    tr = trace(
        "failed.jsonl",
        "kind-handoff",
        180,
        "A migration pod (restartPolicy Never) is scheduled, admitted, runs, and its "
        "container exits 1: phase Failed, not a rejection.",
    )
    cluster_nodes(tr)
    pod = PodSim(
        tr,
        "shop",
        "migrate-db",
        [
            container(
                "migrate",
                "ghcr.io/example/migrate:2024.11.2",
                command=["/app/migrate", "up"],
                requests={"cpu": "100m", "memory": "128Mi"},
            )
        ],
        restart="Never",
        labels={"app": "migrate-db"},
    )
    pod.create(0.4)
    t = normal_pod_run(tr, pod, 0.43, "worker-1", pull_s=0.8)
    pod.terminate(t + 6.1, {"migrate": 1})
    tr.expect(
        pod,
        "failed",
        "scheduler",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "admitted",
            "sandbox_ready",
            "running",
            "ready",
            "finished",
            "rejected",
            "deleted",
        ),
    )


def s15_succeeded() -> None:
    tr = trace(
        "succeeded.jsonl",
        "kind-handoff",
        190,
        "A CronJob's Job pod (ownerReferences Job, job-tracking finalizer) runs to "
        "completion: phase Succeeded, then the Job controller removes its finalizer.",
    )
    cluster_nodes(tr)
    job = "nightly-report-29541600"
    job_uid = det_uid(tr.cluster, "job", job)
    pod = PodSim(
        tr,
        "reports",
        f"{job}-{det_suffix(5, job)}",
        [
            container(
                "report",
                "ghcr.io/example/report:3.3.0",
                command=["/report", "--since=24h"],
                requests={"cpu": "200m", "memory": "256Mi"},
            )
        ],
        generate_name=f"{job}-",
        restart="OnFailure",
        owner={
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job,
            "uid": job_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        },
        labels={
            "batch.kubernetes.io/controller-uid": job_uid,
            "batch.kubernetes.io/job-name": job,
            "controller-uid": job_uid,
            "job-name": job,
        },
        finalizers=["batch.kubernetes.io/job-tracking"],
    )
    pod.create(0.31)
    t = normal_pod_run(tr, pod, 0.34, "worker-3", pull_s=2.2)
    pod.terminate(t + 14.2, {"report": 0})
    del pod.obj["metadata"]["finalizers"]
    pod._emit(t + 14.26)
    tr.expect(
        pod,
        "succeeded",
        "scheduler",
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "sandbox_ready",
            "running",
            "ready",
            "finished",
            "deleted",
        ),
    )


def s16_deleted() -> None:
    tr = trace(
        "deleted.jsonl",
        "kind-handoff",
        200,
        "A person deletes a running pod (kubectl delete): MODIFIED with deletionTimestamp "
        "and deletionGracePeriodSeconds 30, kubelet Killing, containers exit 0 so the "
        "kubelet reports phase Succeeded, then the kubelet's grace-0 delete: DELETED.",
    )
    cluster_nodes(tr)
    pod = PodSim(
        tr, "default", "toolbox", [container("nginx", NGINX, ports=[80])], labels={"run": "toolbox"}
    )
    pod.create(0.5)
    t = normal_pod_run(tr, pod, 0.52, "worker-1", pull_s=0)
    pod.mark_deleting(t + 20.0, 30)
    kubelet_event(tr, t + 20.03, pod, "Killing", "Stopping container nginx", field=c_field(pod))
    pod.terminate(t + 20.9, {"nginx": 0})
    pod.delete(t + 20.97)
    tr.expect(
        pod,
        "deleted",
        "scheduler",
        milestones=("created", "bound", "kubelet_ack", "running", "ready", "deleted"),
    )


def s17_static() -> None:
    tr = trace(
        "static-mirror.jsonl",
        "kind-handoff",
        210,
        "An admin puts kube-scheduler.yaml back into /etc/kubernetes/manifests on "
        "control-plane: the kubelet starts the static pod and creates the mirror pod "
        "kube-scheduler-control-plane (config.source file, config.mirror/hash/seen, owner "
        "Node). Its kubelet events name the static pod by the config hash as uid, not the "
        "mirror pod's uid.",
    )
    nodes = cluster_nodes(tr)
    cp = nodes["control-plane"]
    h = det_hex(32, "kube-scheduler", "manifest")
    image = "registry.k8s.io/kube-scheduler:v1.34.3"
    c = container(
        "kube-scheduler",
        image,
        requests={"cpu": "100m"},
        command=[
            "kube-scheduler",
            "--authentication-kubeconfig=/etc/kubernetes/scheduler.conf",
            "--authorization-kubeconfig=/etc/kubernetes/scheduler.conf",
            "--bind-address=127.0.0.1",
            "--kubeconfig=/etc/kubernetes/scheduler.conf",
            "--leader-elect=true",
        ],
    )
    c["volumeMounts"] = [
        {"name": "kubeconfig", "readOnly": True, "mountPath": "/etc/kubernetes/scheduler.conf"}
    ]
    seen = tr.us(20.118270)
    pod = PodSim(
        tr,
        "kube-system",
        "kube-scheduler-control-plane",
        [c],
        node="control-plane",
        labels={"component": "kube-scheduler", "tier": "control-plane"},
        annotations={
            "kubernetes.io/config.hash": h,
            "kubernetes.io/config.mirror": h,
            "kubernetes.io/config.seen": fmt_us(seen)[:-1] + "524Z",
            "kubernetes.io/config.source": "file",
        },
        owner={
            "apiVersion": "v1",
            "kind": "Node",
            "name": "control-plane",
            "uid": cp.obj["metadata"]["uid"],
            "controller": True,
        },
        tolerations=[{"operator": "Exists", "effect": "NoExecute"}],
        static_hash=h,
        extra_spec={
            "volumes": [
                {
                    "name": "kubeconfig",
                    "hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "FileOrCreate"},
                }
            ],
            "hostNetwork": True,
            "priorityClassName": "system-node-critical",
            "priority": 2000001000,
        },
    )
    # SyncPod creates the mirror pod before it starts the containers.
    pod.create(20.214)
    kubelet_event(
        tr,
        20.301,
        pod,
        "Pulled",
        f'Container image "{image}" already present on machine',
        field=c_field(pod),
        ack=False,
    )
    kubelet_event(
        tr,
        20.342,
        pod,
        "Created",
        "Created container: kube-scheduler",
        field=c_field(pod),
        ack=False,
    )
    kubelet_event(
        tr,
        20.498,
        pod,
        "Started",
        "Started container kube-scheduler",
        field=c_field(pod),
        ack=False,
    )
    # The static pod's status (host network: podIP is the node IP) goes to the mirror pod.
    pod._set_status(
        conditions=[
            pod._cond("PodReadyToStartContainers", "True", tr.us(20.2)),
            pod._cond("Initialized", "True", tr.us(20.2)),
            pod._cond("Ready", "False", tr.us(20.2), "ContainersNotReady", pod._unready()),
            pod._cond(
                "ContainersReady", "False", tr.us(20.2), "ContainersNotReady", pod._unready()
            ),
            pod._cond("PodScheduled", "True", tr.us(20.2)),
        ],
        hostIP=cp.ip,
        hostIPs=[{"ip": cp.ip}],
        podIP=cp.ip,
        podIPs=[{"ip": cp.ip}],
        startTime=ts(tr.us(20.2)),
    )
    pod.run(20.9, started={"kube-scheduler": 20.49}, ready=False)
    # startup probe passes after ~10 s, then Ready.
    at = tr.us(31.4)
    pod._set_status(
        conditions=[
            pod._cond(c2["type"], "True", at) if c2["type"] in ("Ready", "ContainersReady") else c2
            for c2 in pod.status["conditions"]
        ],
        containerStatuses=[dict(s, ready=True) for s in pod.status["containerStatuses"]],
    )
    pod._emit(31.4, reveals={"ready": floor_s(at)})
    background_running(tr, 33.0, "worker-1", "status")
    tr.expect(
        pod,
        "running",
        "static",
        reason=None,
        milestones=("created", "bound", "running", "ready", "rejected", "deleted"),
    )


def s18_first_seen_bound() -> None:
    tr = trace(
        "first-seen-bound.jsonl",
        "kind-handoff",
        220,
        "The watcher starts late: its initial list delivers pods created ~2 h earlier, "
        "already bound and Running, with no Scheduled event (events expired). Binding "
        "unknown; milestones come from the objects' own timestamps (time rule).",
    )
    cluster_nodes(tr)
    tr.allow_late = True
    pods = []
    for i, (node, age) in enumerate(
        (("worker-1", 7412.0), ("worker-3", 7409.0), ("worker-1", 3601.0))
    ):
        p = rs_pod(
            tr,
            "default",
            "catalog-84f5d6c7b9",
            "catalog",
            "84f5d6c7b9",
            [
                container(
                    "catalog",
                    "ghcr.io/example/catalog:6.2.0",
                    requests={"cpu": "100m", "memory": "128Mi"},
                )
            ],
            salt=str(i),
        )
        created = -age
        # Build the past history directly on the object, then list it.
        p.obj["metadata"]["creationTimestamp"] = ts(tr.us(created))
        p.obj["spec"]["nodeName"] = node
        n = tr.nodes[node]
        bound, acked, sand, start, ready = (
            created + 0.03,
            created + 0.09,
            created + 1.1,
            created + 3.6,
            created + 4.4,
        )
        ip = n.pod_ip()
        p.obj["status"] = {
            "phase": "Running",
            "conditions": [
                p._cond("PodReadyToStartContainers", "True", tr.us(sand)),
                p._cond("Initialized", "True", tr.us(acked)),
                p._cond("Ready", "True", tr.us(ready)),
                p._cond("ContainersReady", "True", tr.us(ready)),
                p._cond("PodScheduled", "True", tr.us(bound)),
            ],
            "hostIP": n.ip,
            "hostIPs": [{"ip": n.ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": ts(tr.us(acked)),
            "containerStatuses": [
                p._cstatus(
                    p.containers[0], {"running": {"startedAt": ts(tr.us(start))}}, True, True, True
                )
            ],
            "qosClass": p.qos,
        }
        p.listed(
            0.004,
            {
                "created": floor_s(tr.us(created)),
                "bound": floor_s(tr.us(bound)),
                "kubelet_ack": floor_s(tr.us(acked)),
                "initialized": floor_s(tr.us(acked)),
                "sandbox_ready": floor_s(tr.us(sand)),
                "containers_started": floor_s(tr.us(start)),
                "ready": floor_s(tr.us(ready)),
            },
        )
        pods.append(p)
    bookmark(tr, 0.009, annotations={"k8s.io/initial-events-end": "true"})
    kubelet_event(
        tr,
        12.7,
        pods[0],
        "Unhealthy",
        "Readiness probe failed: HTTP probe failed with statuscode: 503",
        type_="Warning",
        field=c_field(pods[0]),
    )
    for p in pods:
        tr.expect(
            p,
            "running",
            "unknown",
            reason=None,
            milestones=(
                "created",
                "bound",
                "kubelet_ack",
                "initialized",
                "sandbox_ready",
                "containers_started",
                "ready",
                "deleted",
            ),
        )


def s19_relist() -> None:
    tr = trace(
        "relist-replay.jsonl",
        "kind-handoff",
        230,
        "After some MODIFIED events the pod watch gets ERROR 410 Expired and relists: "
        "every pod is replayed as ADDED with identical objects, then a BOOKMARK; the "
        "event watch expires and relists too (events replayed with the same count). "
        "Verdicts must equal those without the replay.",
    )
    cluster_nodes(tr)
    a = rs_pod(
        tr,
        "default",
        "web-6c9f8b7d5",
        "web",
        "6c9f8b7d5",
        [container("nginx", NGINX, requests={"cpu": "100m"})],
        salt="a",
    )
    a.create(1.0)
    normal_pod_run(tr, a, 1.02, "worker-1", pull_s=0)
    b = PodSim(
        tr,
        "analytics",
        "big-batch",
        [container("spark", "apache/spark:3.5.4", requests={"cpu": "8", "memory": "4Gi"})],
    )
    b.create(3.0)
    msg = (
        "0/3 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, "
        "2 Insufficient cpu. preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
        "2 No preemption victims found for incoming pod."
    )
    fs = failed_scheduling(tr, 3.02, b, msg, api="core")
    b.unschedulable(3.023, msg)
    c = PodSim(
        tr,
        "payments",
        "payments-worker",
        [
            container(
                "worker", "registry.example.com/payments/worker:v2.3.9", requests={"cpu": "200m"}
            )
        ],
    )
    c.create(4.0)
    obs = c.bind(4.03, "worker-3")
    scheduled_event(tr, 4.034, c, "worker-3", api="core", after=obs)
    c.ack(4.09)
    c.sandbox(4.9)
    image = "registry.example.com/payments/worker:v2.3.9"
    err = f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": {image}: not found'
    bo = kubelet_event(tr, 5.6, c, "BackOff", f'Back-off pulling image "{image}"', field=c_field(c))
    c.waiting(
        5.63,
        "ImagePullBackOff",
        f'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = {err}',
    )
    fs.repeat(31.5)
    bo.repeat(35.2)
    # pods watch expires: relist replays every pod as it is now
    old = tr.rv - 60
    expired(tr, 40.0, old, "pods")
    for p in (a, b, c):
        tr.replay(40.3, "pods", "ADDED", p.obj)
    bookmark(tr, 40.31)
    expired(tr, 41.0, old + 7, "events")
    for ev in tr_events_snapshot(tr):
        tr.replay(41.2, "events", "ADDED", ev)
    bo.repeat(75.4)
    b_ms = ("created", "bound", "kubelet_ack", "running", "deleted")
    tr.expect(
        a,
        "running",
        "scheduler",
        reason=None,
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "sandbox_ready",
            "running",
            "ready",
            "deleted",
        ),
    )
    tr.expect(b, "unscheduled", None, reason="Unschedulable", milestones=b_ms)
    tr.expect(
        c,
        "stuck",
        "scheduler",
        reason="ImagePullBackOff",
        milestones=("created", "bound", "kubelet_ack", "sandbox_ready", "running", "deleted"),
    )


def tr_events_snapshot(tr: Trace) -> list[dict[str, Any]]:
    """The latest version of every Event object seen so far (what a relist returns)."""
    latest: dict[str, dict[str, Any]] = {}
    for _obs, _order, type_, obj in sorted(tr.lines, key=lambda x: (x[0], x[1])):
        if obj.get("kind") == "Event" and type_ in ("ADDED", "MODIFIED"):
            latest[obj["metadata"]["uid"]] = obj
    return sorted(latest.values(), key=lambda o: int(o["metadata"]["resourceVersion"]))


def s20_deployment_nodename() -> None:
    tr = trace(
        "deployment-nodename.jsonl",
        "kind-manual",
        240,
        "Seed 003: a Deployment whose template sets nodeName: worker-1. The ReplicaSet "
        "creates three pods already pinned (SuccessfulCreate events on the ReplicaSet, no "
        "Scheduled events); the kubelet on worker-1 runs all three.",
    )
    cluster_nodes(tr)
    rs = "web-7d9c6b5f4"
    pods = []
    for i, suffix in enumerate(("x2x9q", "k8m2p", "zq7lw")):
        p = PodSim(
            tr,
            "default",
            f"{rs}-{suffix}",
            [container("nginx", NGINX, ports=[80])],
            node="worker-1",
            generate_name=f"{rs}-",
            owner=rs_owner(tr, rs),
            labels={"app": "web", "pod-template-hash": "7d9c6b5f4"},
        )
        p.create(1.0 + i * 0.011)
        EventSim(
            tr,
            1.002 + i * 0.011,
            {
                "kind": "ReplicaSet",
                "namespace": "default",
                "name": rs,
                "uid": rs_owner(tr, rs)["uid"],
                "apiVersion": "apps/v1",
                "resourceVersion": str(tr.rv - 5),
            },
            "SuccessfulCreate",
            f"Created pod: {p.name}",
            component="replicaset-controller",
        ).post()
        pods.append(p)
    for i, p in enumerate(pods):
        p.ack(1.06 + i * 0.013)
    for i, p in enumerate(pods):
        p.sandbox(1.9 + i * 0.2)
    t = 2.4
    for p in pods:
        t2 = start_containers(tr, p, t, pull_s=0)
        p.run(t2 + 0.15, started={"nginx": t2 - 0.01})
        t = t2 + 0.2
    for p in pods:
        tr.expect(
            p,
            "running",
            "manual",
            reason=None,
            milestones=(
                "created",
                "bound",
                "kubelet_ack",
                "admitted",
                "sandbox_ready",
                "running",
                "ready",
                "deleted",
            ),
        )


def s21_secrets() -> None:
    tr = trace(
        "secrets.jsonl",
        "kind-handoff",
        250,
        "A running pod whose container env carries DB_PASSWORD=hunter2, also present in "
        "the kubectl.kubernetes.io/last-applied-configuration annotation; managedFields "
        "included. The timeline must never store or print 'hunter2'.",
    )
    cluster_nodes(tr)
    env = [
        {"name": "DB_HOST", "value": "postgres.payments.svc"},
        {"name": "DB_PASSWORD", "value": "hunter2"},
        {
            "name": "API_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "payments-api", "key": "token"}},
        },
    ]
    applied = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": {},
            "labels": {"app": "payments-api"},
            "name": "payments-api",
            "namespace": "payments",
        },
        "spec": {
            "containers": [
                {
                    "env": [
                        {"name": "DB_HOST", "value": "postgres.payments.svc"},
                        {"name": "DB_PASSWORD", "value": "hunter2"},
                        {
                            "name": "API_TOKEN",
                            "valueFrom": {"secretKeyRef": {"key": "token", "name": "payments-api"}},
                        },
                    ],
                    "image": "ghcr.io/example/payments-api:1.9.0",
                    "name": "api",
                    "ports": [{"containerPort": 8443}],
                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                }
            ]
        },
    }
    pod = PodSim(
        tr,
        "payments",
        "payments-api",
        [
            container(
                "api",
                "ghcr.io/example/payments-api:1.9.0",
                requests={"cpu": "250m", "memory": "256Mi"},
                env=env,
                ports=[8443],
            )
        ],
        labels={"app": "payments-api"},
        annotations={
            "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                applied, separators=(",", ":")
            )
            + "\n"
        },
    )
    pod.obj["metadata"]["managedFields"] = [
        {
            "manager": "kubectl-client-side-apply",
            "operation": "Update",
            "apiVersion": "v1",
            "time": ts(tr.us(0.7)),
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {
                    "f:annotations": {
                        ".": {},
                        "f:kubectl.kubernetes.io/last-applied-configuration": {},
                    },
                    "f:labels": {".": {}, "f:app": {}},
                },
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"api"}': {
                            ".": {},
                            "f:env": {
                                ".": {},
                                'k:{"name":"API_TOKEN"}': {
                                    ".": {},
                                    "f:name": {},
                                    "f:valueFrom": {".": {}, "f:secretKeyRef": {}},
                                },
                                'k:{"name":"DB_HOST"}': {".": {}, "f:name": {}, "f:value": {}},
                                'k:{"name":"DB_PASSWORD"}': {".": {}, "f:name": {}, "f:value": {}},
                            },
                            "f:image": {},
                            "f:name": {},
                        }
                    }
                },
            },
        }
    ]
    pod.create(0.7)
    normal_pod_run(tr, pod, 0.73, "worker-3", pull_s=1.9)
    tr.expect(
        pod,
        "running",
        "scheduler",
        reason=None,
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "sandbox_ready",
            "running",
            "ready",
            "deleted",
        ),
    )


def s22_recreated() -> None:
    tr = trace(
        "recreated-same-name.jsonl",
        "kind-handoff",
        260,
        "StatefulSet pod db-0 is deleted and recreated with the same name and a new uid. "
        "The old incarnation's Killing event reaches the (lagging) event watch after the "
        "new pod's ADDED: it must stay with the old uid. Keys: 'data/db-0' is the new "
        "incarnation, 'data/db-0@<old uid>' the old one.",
    )
    cluster_nodes(tr)
    owner = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "name": "db",
        "uid": det_uid(tr.cluster, "sts", "db"),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    labels = {
        "app": "db",
        "apps.kubernetes.io/pod-index": "0",
        "statefulset.kubernetes.io/pod-name": "db-0",
    }

    def mk(incarnation: str, key: str | None) -> PodSim:
        return PodSim(
            tr,
            "data",
            "db-0",
            [
                container(
                    "postgres",
                    "postgres:17.2",
                    requests={"cpu": "500m", "memory": "1Gi"},
                    ports=[5432],
                )
            ],
            owner=owner,
            labels=dict(labels),
            incarnation=incarnation,
            key=key,
            extra_spec={"hostname": "db-0", "subdomain": "db"},
        )

    first = mk("1", None)
    first.key = f"data/db-0@{first.uid}"
    first.create(0.5)
    normal_pod_run(tr, first, 0.53, "worker-1", pull_s=4.1)
    first.mark_deleting(30.0, 30)
    kubelet_event(
        tr,
        30.02,
        first,
        "Killing",
        "Stopping container postgres",
        field=c_field(first),
        lat_ms=2600,
    )
    first.terminate(31.1, {"postgres": 0})
    first.delete(31.16)
    second = mk("2", None)
    second.create(31.19)
    normal_pod_run(tr, second, 31.22, "worker-3", pull_s=3.7)
    tr.expect(first, "deleted", "scheduler", milestones=("created", "bound", "running", "deleted"))
    tr.expect(
        second,
        "running",
        "scheduler",
        reason=None,
        milestones=(
            "created",
            "bound",
            "kubelet_ack",
            "sandbox_ready",
            "running",
            "ready",
            "deleted",
        ),
    )


def s23_first_seen_deleted() -> None:
    tr = trace(
        "first-seen-deleted.jsonl",
        "kind-handoff",
        270,
        "A fragment of a recording: the first line about pod old-worker is its DELETED "
        "(the ADDED/MODIFIED fell before the recording started). It was Running on "
        "worker-1 and force-deleted (grace 0). Nothing is known about its binding.",
    )
    cluster_nodes(tr)
    p = rs_pod(
        tr,
        "default",
        "old-worker-5b6c7d8e9",
        "old-worker",
        "5b6c7d8e9",
        [container("worker", "ghcr.io/example/worker:0.9.0", requests={"cpu": "100m"})],
    )
    created = -900.0
    p.obj["metadata"]["creationTimestamp"] = ts(tr.us(created))
    p.obj["spec"]["nodeName"] = "worker-1"
    n = tr.nodes["worker-1"]
    ip = n.pod_ip()
    p.started = {"worker": tr.us(created + 2.9)}
    p.obj["status"] = {
        "phase": "Running",
        "conditions": [
            p._cond("PodReadyToStartContainers", "True", tr.us(created + 1)),
            p._cond("Initialized", "True", tr.us(created + 0.1)),
            p._cond("Ready", "True", tr.us(created + 3)),
            p._cond("ContainersReady", "True", tr.us(created + 3)),
            p._cond("PodScheduled", "True", tr.us(created + 0.05)),
        ],
        "hostIP": n.ip,
        "hostIPs": [{"ip": n.ip}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": ts(tr.us(created + 0.1)),
        "containerStatuses": [
            p._cstatus(
                p.containers[0],
                {"running": {"startedAt": ts(p.started["worker"])}},
                True,
                True,
                True,
            )
        ],
        "qosClass": p.qos,
    }
    p.delete(3.4)  # kubectl delete --force --grace-period=0: the Running copy, stamped
    background_running(tr, 5.0, "worker-3", "status")
    tr.expect(p, "deleted", "unknown", milestones=("deleted",))


SCENARIOS = [
    s01_scheduled_running,
    s02_core_events,
    s03_unscheduled,
    s04_awaiting_kubelet,
    s05_stuck_kubelet_silent,
    s06_stuck_image_pull,
    s07_starting,
    s08_rejections,
    s09_podgc,
    s12_evicted,
    s13_node_lost,
    s14_failed,
    s15_succeeded,
    s16_deleted,
    s17_static,
    s18_first_seen_bound,
    s19_relist,
    s20_deployment_nodename,
    s21_secrets,
    s22_recreated,
    s23_first_seen_deleted,
]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for scenario in SCENARIOS:
        scenario()
    expected: dict[str, Any] = {}
    for tr in TRACES:
        name, doc = tr.write()
        expected[name] = doc
    (OUT / "expected.json").write_text(json.dumps(expected, indent=2) + "\n")
    (OUT / "README.md").write_text(readme())


README_HEAD = """\
# Scripted watch traces

Written by `tests/data/build_traces.py` (run it from the repository root; it
reproduces every file here byte for byte). Hand edits will be overwritten.

These traces are the yardstick for the timeline engine. They are written from
Kubernetes' behaviour (`../shared/HANDOFF_FACTS.md`, the seeds, the real
objects in `../shared/traces/real/`), not from the engine's code.

## Format

Trace format v1 (`handoff/trace.py`): a header line
`{"handoff_trace":1,"cluster":...,"source":"scripted"}`, then one watch event
per line, in observed order. Three watches are interleaved: pods, events,
nodes. Each starts with its list (nodes are listed as ADDED at the start of
every trace). Every object change gets the next cluster-wide resourceVersion
and is observed 5-50 ms later by its watch; within one watch the order is kept,
across watches it is not, so an Event may be observed before the Pod change it
relates to. Object timestamps are truncated to the second; `eventTime` and
`series.lastObservedTime` have microseconds.

Objects follow a v1.34 cluster (kind-like names). The Event shape varies on
purpose, and a real watcher would pick one API per stream:

- kubelet and controller events come from the legacy recorder: core/v1 with
  `source{component,host}`, `firstTimestamp`/`lastTimestamp`, `count`,
  `eventTime: null`, `reportingComponent`/`reportingInstance` copied from the
  source (current client-go `tools/record` does this; older data has ""). Repeats are MODIFIED of the same
  object with `count` + 1 and a new `lastTimestamp`.
- kube-scheduler events come from the events.k8s.io recorder: `eventTime`
  (microseconds), `action`, `reportingController: default-scheduler`,
  `reportingInstance: default-scheduler-control-plane`. Read through
  events.k8s.io/v1 they have `regarding`/`note`/`deprecatedSource: {}`; read
  through core/v1 they have `source: {}`, `firstTimestamp: null`, no `count`.
  A repeat is a MODIFIED with `series: {count: 2, lastObservedTime}`; later
  repeats stay in the recorder's cache (flushed every 30 min), so short traces
  never show count 3 from the scheduler.
- `starting.jsonl` reads the kubelet's events through events.k8s.io/v1
  (`deprecatedSource`, `deprecatedCount`, `eventTime: null`).

## expected.json

`{"<file>": {"at"?: T, "stuck_after": 60, "pods": {"<ns>/<name>": {...}}}}`.
`at`, when present, is the evaluation time (`--at`); otherwise evaluate at the
last observed time of the trace. Per pod: `uid`, `verdict`, `binding`, `node`
(`spec.nodeName` or null), `reason` only where it is certain (a string, or null
meaning "must be null"; absent means "not asserted"), and `milestones`: only the
listed ones are asserted, null meaning "must be null". Pods present in a trace
but absent from `pods` are deliberately not asserted (see the notes below).
When one name is used by two incarnations, the older one is keyed
`<ns>/<name>@<uid>`.

Milestone times follow the time rule: each watch event that reveals a fact
dates it at its `observed` time, except when that object carries its own
timestamp for the fact (creationTimestamp, condition lastTransitionTime,
startTime, startedAt, event firstTimestamp/eventTime, deletionTimestamp) and
that timestamp + 1 s < observed: then the object's (coarse) second. Of several
reveals the earliest wins, except that a coarse second never undercuts a
precise time inside it and a precise time inside a coarse second refines it
(docs/trace-format.md). The generator computes them mechanically from the
events that reveal each fact:

- created: the pod's first line (ADDED), own timestamp creationTimestamp;
- bound: the MODIFIED that sets `spec.nodeName` (own: PodScheduled
  lastTransitionTime), the `Scheduled` event if it came first, or the ADDED
  of a pod created with `nodeName` (manual and static pods: bound = created);
- kubelet_ack: the first of the kubelet's first status write (own: startTime),
  a kubelet-sourced event (own: firstTimestamp), or the rejection status;
- admitted / initialized: the kubelet's first non-rejecting status write;
- rejected: the rejection status (phase Failed, reason from kubelet admission);
- sandbox_ready: PodReadyToStartContainers=True; running: phase Running;
  ready: Ready=True; finished: phase Succeeded/Failed; deleted: DELETED.

## Traces
"""

README_NOTES = """
## Notes and decisions (where HANDOFF_FACTS was ambiguous or the source says more)

- Races on purpose: in unscheduled.jsonl big-batch's FailedScheduling is
  observed before the Pod's ADDED; in scheduled-running-core-events.jsonl the
  kubelet's Pulling event comes before the Pod MODIFIED carrying its first
  status (so kubelet_ack is the event's observed time) and Started before the
  MODIFIED showing Running; in rejected-scheduler-race.jsonl the OutOfcpu
  event comes before the Failed status; in recreated-same-name.jsonl the old
  incarnation's Killing arrives after the new incarnation's ADDED. The
  Scheduled event is always observed after the binding MODIFIED.
- Time rule: in every trace except first-seen-bound.jsonl and
  scheduled-running-core-events.jsonl (whose late status write proves the
  kubelet had the pod within an earlier second), each asserted
  milestone takes an `observed` time (the generator refuses a scenario where an
  asserted milestone would fall back to the object's own timestamp by
  accident). first-seen-bound.jsonl is the one where the list is hours late,
  so every asserted milestone is the object's own timestamp.

- Pod `NodeNotReady` events: `MarkPodsNotReady` (node lifecycle controller)
  only updates pods that have a `Ready` condition whose status changes, and
  records the pod event only then. A pod not yet Ready (ContainerCreating, or
  never seen by a kubelet) gets neither. So in node-lost.jsonl only web-old
  (Running, Ready) gets the pod event; the two node-lost pods only see the
  Node's Ready=Unknown, the `NodeNotReady` Node event and the taints. web-old
  itself is not asserted: it reached Running before the node was lost, which
  the verdict list does not settle (`running` by phase, or a node-lost cause).
- Kubelet rejection: `rejectPod` records the Warning event, then sets status
  {phase Failed, reason, message "Pod was rejected: ...", qosClass}; the status
  manager adds startTime and drops kubelet-owned conditions (the binding's
  PodScheduled among them), so rejected pods carry no conditions and no hostIP.
  Which of event and status is observed first varies; both orders appear.
- TaintToleration message: `Predicate TaintToleration failed: node(s) had
  taints that the pod didn't tolerate` (tainttoleration.ErrReasonNotMatch,
  wrapped by the kubelet's PredicateFailureError).
- Static pods: kubelet events about a static pod carry the static pod's UID,
  which is the config hash (`kubernetes.io/config.hash`), not the mirror pod's
  API uid. Match them via the mirror annotation (or namespace/name).
- Grace-0 deletions (PodGC, the kubelet's final delete) produce DELETED with
  `deletionTimestamp` and `deletionGracePeriodSeconds: 0` in these traces; the
  old-style PodGC trace has a DELETED without either (facts §3: possibly
  without). Engines should not rely on an intermediate MODIFIED.
- Graceful deletion of a running pod: since v1.27 the kubelet writes a terminal
  phase before the final delete (Succeeded when every container exits 0, as
  nginx does on its SIGQUIT stop signal). `deleted.jsonl` therefore ends
  Succeeded then DELETED; the verdict is `deleted` because the deletion began
  before the pod finished (a deletion's cause wins over the phase it ended in).
  Likewise evicted pods end Failed (exit 137) and are `evicted`.
- Taint-based eviction reason: the cause can be named TaintManagerEviction or
  DeletionByTaintManager; the reason is not asserted for it. The kubelet's
  node-pressure eviction is asserted with reason `Evicted` (pod status reason).
  Its DisruptionTarget condition has reason `TerminationByKubelet`.
- Scheduler retries: once the PodScheduled=False condition holds the same
  message, the scheduler does not rewrite the pod; only the event repeats.
- A secondary scheduler (`batch-scheduler`, legacy recorder) provides the
  core/v1 `count`++ form of FailedScheduling; modern kube-scheduler repeats
  appear as `series`.
- The taint-eviction controller is `taint-eviction-controller` (v1.29+).
- Binding kinds: `manual` for pods created with nodeName (no Scheduled event);
  `static` for the mirror pod; `unknown` for pods first seen bound in a list
  with nothing to tell; `scheduler` for an observed unbound-to-bound change or a
  Scheduled event.
- `awaiting-kubelet`, `starting`, `stuck` are about the pod's state at the
  evaluation time, so those traces end with unrelated activity at the right
  time (or set `at`).
"""


def readme() -> str:
    lines = [README_HEAD]
    for tr in TRACES:
        lines.append(f"- `{tr.file}` (cluster `{tr.cluster}`): {tr.about}\n")
    lines.append(README_NOTES)
    return "".join(lines)


if __name__ == "__main__":
    main()
