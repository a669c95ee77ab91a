"""Builders for API objects shaped like the API server's JSON, plus quantity and time helpers.

Objects are plain dicts. Stored objects are never mutated in place: a change builds a
new dict through :func:`edit`, so every watcher can keep the reference it was handed.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from random import Random
from typing import Any

Obj = dict[str, Any]

# Suffixes of resource.Quantity, as multipliers of the base unit.
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


_VERSION_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_VERSION_SET = (0x4000 << 64) | (0x8000 << 48)


def new_uid(rng: Random) -> str:
    """A version-4 uid drawn from the simulation's RNG, so runs repeat exactly.

    The same string as ``str(uuid.UUID(int=bits, version=4))``, without its slow constructor.
    """
    h = f"{(rng.getrandbits(128) & _VERSION_CLEAR) | _VERSION_SET:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_second_cache: dict[int, str] = {}


def stamp(t: float) -> str:
    """RFC 3339 with 1-second precision, truncated, as metav1.Time serialises."""
    sec = int(t)
    text = _second_cache.get(sec)
    if text is None:
        if len(_second_cache) > 4096:
            _second_cache.clear()
        text = datetime.fromtimestamp(sec, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _second_cache[sec] = text
    return text


def micro(t: float) -> str:
    """RFC 3339 with microseconds, as metav1.MicroTime serialises (events.k8s.io eventTime)."""
    us = round(t * 1_000_000)
    return f"{stamp(us // 1_000_000)[:-1]}.{us % 1_000_000:06d}Z"


def parse_stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def cpu_millis(q: str | int | float | None) -> int:
    """A cpu quantity in millicores ("100m" -> 100, "2" -> 2000)."""
    if q is None:
        return 0
    if isinstance(q, int | float):
        return round(q * 1000)
    if q.endswith("m"):
        return int(q[:-1])
    return round(_plain(q) * 1000)


def mem_bytes(q: str | int | float | None) -> int:
    """A memory/storage quantity in bytes ("512Mi" -> 536870912)."""
    if q is None:
        return 0
    if isinstance(q, int | float):
        return int(q)
    if q.endswith("m"):
        return int(q[:-1]) // 1000
    return round(_plain(q))


def _plain(q: str) -> float:
    for suffix, mult in _BINARY.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * mult
    for suffix, mult in _DECIMAL.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * mult
    return float(q)


def edit(obj: Obj, *parts: str) -> Obj:
    """A copy of ``obj`` with the named top-level parts copied one level deep."""
    new = dict(obj)
    for part in parts:
        value = obj.get(part)
        new[part] = dict(value) if isinstance(value, dict) else {}
    return new


_requests_cache: dict[int, tuple[Any, Any, tuple[int, int]]] = {}


def pod_requests(pod: Obj) -> tuple[int, int]:
    """(milli-cpu, memory bytes) the way the scheduler and kubelet count a pod.

    max(sum of app containers, largest init container), as the NodeResourcesFit plugin does.
    Container lists are shared by every copy of a pod, so the answer is cached on them.
    """
    spec = pod["spec"]
    containers = spec.get("containers")
    inits = spec.get("initContainers")
    hit = _requests_cache.get(id(containers))
    if hit is not None and hit[0] is containers and hit[1] is inits:
        return hit[2]
    result = _pod_requests(spec)
    if len(_requests_cache) > 65536:
        _requests_cache.clear()
    _requests_cache[id(containers)] = (containers, inits, result)
    return result


def _pod_requests(spec: Obj) -> tuple[int, int]:
    cpu = mem = 0
    for c in spec.get("containers", ()):
        req = (c.get("resources") or {}).get("requests") or {}
        cpu += cpu_millis(req.get("cpu"))
        mem += mem_bytes(req.get("memory"))
    for c in spec.get("initContainers", ()):
        req = (c.get("resources") or {}).get("requests") or {}
        cpu = max(cpu, cpu_millis(req.get("cpu")))
        mem = max(mem, mem_bytes(req.get("memory")))
    return cpu, mem


_ports: dict[int, tuple[Any, frozenset[tuple[str, str, int]]]] = {}


def host_ports(pod: Obj) -> frozenset[tuple[str, str, int]]:
    """(protocol, hostIP, hostPort) of every container port that claims one on the node.

    Container lists are shared by every copy of a pod, so the answer is cached on them."""
    containers = pod["spec"].get("containers")
    hit = _ports.get(id(containers))
    if hit is not None and hit[0] is containers and "initContainers" not in pod["spec"]:
        return hit[1]
    found = _host_ports(pod)
    if len(_ports) > 65536:
        _ports.clear()
    _ports[id(containers)] = (containers, found)
    return found


def _host_ports(pod: Obj) -> frozenset[tuple[str, str, int]]:
    out: set[tuple[str, str, int]] = set()
    spec = pod["spec"]
    for c in (*spec.get("initContainers", ()), *spec.get("containers", ())):
        for port in c.get("ports") or ():
            if port.get("hostPort"):
                ip = port.get("hostIP") or "0.0.0.0"
                out.add((port.get("protocol", "TCP"), ip, int(port["hostPort"])))
    return frozenset(out)


def ports_conflict(
    wanted: frozenset[tuple[str, str, int]], used: set[tuple[str, str, int]] | frozenset
) -> bool:
    """HostPortInfo.CheckConflict: same protocol and port, and the same IP or 0.0.0.0."""
    for protocol, ip, port in wanted:
        for other_protocol, other_ip, other_port in used:
            if (
                port == other_port
                and protocol == other_protocol
                and (ip == other_ip or "0.0.0.0" in (ip, other_ip))
            ):
                return True
    return False


def qos_class(spec: Obj) -> str:
    requests = limits = False
    for c in spec.get("containers", ()):
        res = c.get("resources") or {}
        requests = requests or bool(res.get("requests"))
        limits = limits or bool(res.get("limits"))
    if not requests and not limits:
        return "BestEffort"
    if limits and all(
        (c.get("resources") or {}).get("limits", {}).keys() >= {"cpu", "memory"}
        for c in spec.get("containers", ())
    ):
        return "Guaranteed"
    return "Burstable"


def container(name: str, image: str, cpu: str | None = None, memory: str | None = None) -> Obj:
    requests: Obj = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    return {
        "name": name,
        "image": image,
        "resources": {"requests": requests} if requests else {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": pull_policy(image),
    }


def pull_policy(image: str) -> str:
    """Defaulting rule: ``:latest`` or no tag pulls Always, otherwise IfNotPresent."""
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return "IfNotPresent"
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def pod_spec(
    containers: list[Obj],
    *,
    node_name: str | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[Obj] | None = None,
    restart_policy: str = "Always",
    init_containers: list[Obj] | None = None,
    affinity: Obj | None = None,
    scheduler_name: str = "default-scheduler",
) -> Obj:
    spec: Obj = {}
    if init_containers:
        spec["initContainers"] = init_containers
    spec["containers"] = containers
    spec["restartPolicy"] = restart_policy
    spec["terminationGracePeriodSeconds"] = 30
    spec["dnsPolicy"] = "ClusterFirst"
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec["serviceAccountName"] = "default"
    spec["serviceAccount"] = "default"
    if node_name:
        spec["nodeName"] = node_name
    spec["securityContext"] = {}
    if affinity:
        spec["affinity"] = affinity
    spec["schedulerName"] = scheduler_name
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    spec["priority"] = 0
    spec["enableServiceLinks"] = True
    spec["preemptionPolicy"] = "PreemptLowerPriority"
    return spec


def pod(
    name: str,
    namespace: str,
    spec: Obj,
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: Obj | None = None,
    generate_name: str | None = None,
) -> Obj:
    """A Pod as a client would POST it (the API server fills uid, resourceVersion, status)."""
    meta: Obj = {"name": name, "namespace": namespace}
    if generate_name:
        meta["generateName"] = generate_name
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [owner]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec}


_last_defaulted: list[Obj] = [{}, {}]


def add_default_tolerations(spec: Obj) -> Obj:
    """DefaultTolerationSeconds admission: tolerate not-ready/unreachable for 300 s.

    Controllers hand the same template spec over and over; the last answer is reused.
    """
    if spec is _last_defaulted[0]:
        return _last_defaulted[1]
    out = _add_default_tolerations(spec)
    _last_defaulted[0], _last_defaulted[1] = spec, out
    return out


def _add_default_tolerations(spec: Obj) -> Obj:
    tolerations = list(spec.get("tolerations") or ())
    for key in (NOT_READY_TAINT, UNREACHABLE_TAINT):
        probe = {"key": key, "effect": "NoExecute"}
        if not any(tolerates(t, probe) for t in tolerations):
            tolerations.append(
                {
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
                }
            )
    return {**spec, "tolerations": tolerations}


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """v1.Toleration.ToleratesTaint."""
    effect = toleration.get("effect")
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key")
    if key and key != taint.get("key"):
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    return (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: list[Obj], tolerations: list[Obj], effects: tuple[str, ...]) -> Obj | None:
    """The first taint with one of ``effects`` that no toleration tolerates."""
    for taint in taints:
        if taint.get("effect") not in effects:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def matches_node(pod_spec_: Obj, node: Obj) -> bool:
    """nodeSelector plus required node affinity (In/NotIn/Exists/DoesNotExist on labels)."""
    labels = node["metadata"].get("labels") or {}
    for key, value in (pod_spec_.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return False
    required = ((pod_spec_.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms")
    if not terms:
        return True
    return any(_term_matches(term, labels, node["metadata"]["name"]) for term in terms)


def _term_matches(term: Obj, labels: dict[str, str], name: str) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    for expr in exprs:
        if not _expr_matches(expr, labels.get(expr["key"]), expr["key"] in labels):
            return False
    for expr in fields:
        if expr["key"] != "metadata.name" or not _expr_matches(expr, name, True):
            return False
    return True


def _expr_matches(expr: Obj, value: str | None, present: bool) -> bool:
    op = expr["operator"]
    values = expr.get("values") or []
    if op == "In":
        return present and value in values
    if op == "NotIn":
        return not present or value not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and values:
        try:
            a, b = int(value or ""), int(values[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def match_labels(selector: Obj | dict[str, str] | None, labels: dict[str, str]) -> bool:
    """A LabelSelector ({matchLabels, matchExpressions}) or a plain map against labels."""
    if not selector:
        return True
    if "matchLabels" in selector or "matchExpressions" in selector:
        for k, v in (selector.get("matchLabels") or {}).items():
            if labels.get(k) != v:
                return False
        for expr in selector.get("matchExpressions") or ():
            if not _expr_matches(expr, labels.get(expr["key"]), expr["key"] in labels):
                return False
        return True
    return all(labels.get(k) == v for k, v in selector.items())


def node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: int = 110,
    labels: dict[str, str] | None = None,
    taints: list[Obj] | None = None,
    index: int = 0,
    kubelet_version: str = "v1.33.1",
) -> Obj:
    """A Node as the kubelet registers it (conditions are filled in by the kubelet)."""
    all_labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    all_labels.update(labels or {})
    mem_ki = f"{mem_bytes(memory) // 1024}Ki"
    capacity = {
        "cpu": cpu,
        "ephemeral-storage": "102626232Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": mem_ki,
        "pods": str(pods),
    }
    spec: Obj = {
        "podCIDR": f"10.{244 + index // 256}.{index % 256}.0/24",
        "podCIDRs": [f"10.{244 + index // 256}.{index % 256}.0/24"],
        "providerID": f"kind://docker/sim/{name}",
    }
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "labels": all_labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [],
            "addresses": [
                {"type": "InternalIP", "address": f"172.18.{index // 250}.{index % 250 + 2}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            # Every field a real kubelet reports; bootID, machineID and systemUUID are
            # required by clients' typed models. Derived from the name: no RNG draw.
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"boot.{name}.sim")),
                "containerRuntimeVersion": "containerd://2.1.1",
                "kernelVersion": "6.8.0-sim",
                "kubeProxyVersion": "",
                "kubeletVersion": kubelet_version,
                "machineID": uuid.uuid5(uuid.NAMESPACE_DNS, f"machine.{name}.sim").hex,
                "operatingSystem": "linux",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "systemUUID": str(uuid.uuid5(uuid.NAMESPACE_DNS, f"system.{name}.sim")),
            },
        },
    }


def node_ip(node_obj: Obj) -> str:
    for addr in node_obj["status"].get("addresses", ()):
        if addr["type"] == "InternalIP":
            return addr["address"]
    return ""


def go_duration(seconds: float) -> str:
    """time.Duration.String() of a duration truncated to milliseconds ("1.402s", "850ms")."""
    ms = int(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    whole, frac = divmod(ms, 1000)
    minutes, secs = divmod(whole, 60)
    head = f"{minutes}m" if minutes else ""
    tail = f"{secs}.{frac:03d}".rstrip("0").rstrip(".") if frac else str(secs)
    return f"{head}{tail}s"
