"""The simulated API server: object store, resourceVersions, deletion semantics, watch fan-out.

Resources are "pods", "nodes", "events", "deployments", "replicasets" and "jobs" (events are
stored once, in the group they were written through, and converted on the way out; see
events.py). Writes take effect at once; latency belongs to the watchers, which schedule
their own delivery.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from handoff.core.resources import SIMULATED
from handoff.sim.clock import Loop
from handoff.sim.objects import (
    Obj,
    add_default_tolerations,
    edit,
    new_uid,
    pull_policy,
    qos_class,
    stamp,
)

# The k8s name-generator alphabet: no vowels, no confusable digits.
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
TERMINAL = ("Succeeded", "Failed")
NAMESPACED = {
    "pods": True,
    "events": True,
    "nodes": False,
    "deployments": True,
    "replicasets": True,
    "jobs": True,
}


class ApiError(Exception):
    """An API error carrying the Status the server would return."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: Obj | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details or {}
        self.headers = headers or {}

    def status(self) -> Obj:
        out: Obj = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details:
            out["details"] = self.details
        out["code"] = self.code
        return out


def not_found(resource: str, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{resource} "{name}" not found', {"name": name, "kind": resource}
    )


def expired(requested: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")


Handler = Callable[[str, Obj], None]


@dataclass(slots=True)
class Subscription:
    """A watch: ``handler(type, obj)`` for every change that passes the filters."""

    resource: str
    handler: Handler
    namespace: str | None = None
    node_name: str | None = None
    predicate: Callable[[Obj], bool] | None = None
    active: bool = True


@dataclass(slots=True)
class Change:
    rv: int
    type: str
    obj: Obj


@dataclass
class Store:
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    # (rv, type, object) per change: tuples, built faster than a Change on every write.
    history: deque[tuple[int, str, Obj]] = field(default_factory=deque)
    subs: list[Subscription] = field(default_factory=list)
    # Removed-from-history horizon: a watch from an rv below this gets 410.
    compacted: int = 0
    # subs split for the hot path: handlers that take everything, and filtered ones.
    plain: list[Handler] = field(default_factory=list)
    filtered: list[Subscription] = field(default_factory=list)

    def split(self) -> None:
        self.plain = [s.handler for s in self.subs if s.namespace is None and s.predicate is None]
        self.filtered = [s for s in self.subs if s.namespace is not None or s.predicate]


class APIServer:
    """Objects keyed by (namespace, name) per resource, with one cluster-wide resourceVersion."""

    def __init__(self, loop: Loop, history: int = 20000, event_ttl: float = 3600.0) -> None:
        self.loop = loop
        self.rv = 1
        self.history_limit = history
        self.event_ttl = event_ttl
        self.stores = {name: Store() for name in SIMULATED}
        self.pods_by_node: dict[str, dict[tuple[str, str], Obj]] = {}
        # Stored pods in phase Succeeded or Failed: PodGC lists them only past its threshold.
        self.terminal_pods = 0
        self.node_subs: dict[str, list[Subscription]] = {}
        self.leases: dict[str, float] = {}
        self._event_expiry: deque[tuple[float, tuple[str, str]]] = deque()
        self._event_written: dict[tuple[str, str], float] = {}
        self.counts = {"ADDED": 0, "MODIFIED": 0, "DELETED": 0}
        # Every pod delete writes deletionTimestamp/deletionGracePeriodSeconds (MODIFIED)
        # before the object goes (DELETED), grace 0 included, as the generic registry's
        # updateForGracefulDeletionAndFinalizers does (FIDELITY_AUDIT X1, X2). Off: grace-0
        # deletes send DELETED alone (the simulator's default shape, kept for its traces).
        self.graceful_deletes = False
        # ResourceQuota on the pod count: namespace -> (quota name, pods allowed).
        self.pod_quotas: dict[str, tuple[str, int]] = {}
        # The old recorder's Events leave reportingComponent empty (ClusterConfig).
        self.legacy_event_reporting = False
        loop.every(60.0, self._expire_events)

    # --- reads -----------------------------------------------------------------------------

    def get(self, resource: str, namespace: str, name: str) -> Obj:
        obj = self.stores[resource].objects.get((namespace, name))
        if obj is None:
            raise not_found(resource, name)
        return obj

    def find(self, resource: str, namespace: str, name: str) -> Obj | None:
        return self.stores[resource].objects.get((namespace, name))

    def list(self, resource: str, namespace: str | None = None) -> tuple[list[Obj], int]:
        objs = self.stores[resource].objects
        if namespace is None:
            items = list(objs.values())
        else:
            items = [o for (ns, _), o in objs.items() if ns == namespace]
        return items, self.rv

    def nodes(self) -> dict[tuple[str, str], Obj]:
        return self.stores["nodes"].objects

    def pods_on(self, node_name: str) -> list[Obj]:
        return list(self.pods_by_node.get(node_name, {}).values())

    def history_since(self, resource: str, rv: int) -> list[Change]:
        """Changes after ``rv``; 410 when they are no longer all kept."""
        store = self.stores[resource]
        if rv < store.compacted:
            raise expired(rv, store.compacted)
        hist = store.history
        if not hist or hist[-1][0] <= rv:
            return []
        return [Change(*c) for c in hist if c[0] > rv]

    # --- watch -----------------------------------------------------------------------------

    def subscribe(
        self,
        resource: str,
        handler: Handler,
        *,
        namespace: str | None = None,
        node_name: str | None = None,
        predicate: Callable[[Obj], bool] | None = None,
    ) -> Subscription:
        sub = Subscription(resource, handler, namespace, node_name, predicate)
        if node_name is not None and resource == "pods":
            self.node_subs.setdefault(node_name, []).append(sub)
        else:
            self.stores[resource].subs.append(sub)
            self.stores[resource].split()
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.active = False
        if sub.node_name is not None and sub.resource == "pods":
            subs = self.node_subs.get(sub.node_name, [])
        else:
            subs = self.stores[sub.resource].subs
        if sub in subs:
            subs.remove(sub)
        self.stores[sub.resource].split()

    def _emit(self, resource: str, type_: str, obj: Obj, old: Obj | None = None) -> None:
        store = self.stores[resource]
        self.counts[type_] += 1
        hist = store.history
        hist.append((self.rv, type_, obj))
        if len(hist) > self.history_limit:
            store.compacted = hist.popleft()[0]
        for handler in store.plain:
            handler(type_, obj)
        if store.filtered:
            # Watchers sharing a predicate (the ReplicaSet and Job controllers' "owned pods")
            # evaluate it once: predicates are pure functions of the immutable object.
            last_predicate: Callable[[Obj], bool] | None = None
            passed = False
            for sub in store.filtered:
                if sub.namespace is not None and sub.namespace != obj["metadata"].get("namespace"):
                    continue
                predicate = sub.predicate
                if predicate is not None:
                    if predicate is not last_predicate:
                        last_predicate = predicate
                        passed = predicate(obj)
                    if not passed:
                        continue
                sub.handler(type_, obj)
        if resource == "pods":
            # spec.nodeName-filtered watches: a pod entering the filter arrives as ADDED.
            node_name = obj["spec"].get("nodeName")
            old_node = old["spec"].get("nodeName") if old is not None else None
            node_subs = self.node_subs
            if old_node and old_node != node_name:
                for sub in node_subs.get(old_node, ()):
                    sub.handler("DELETED", obj)
            if node_name:
                if type_ == "MODIFIED" and old_node != node_name:
                    type_ = "ADDED"
                for sub in node_subs.get(node_name, ()):
                    sub.handler(type_, obj)

    # --- writes ----------------------------------------------------------------------------

    def renew_lease(self, name: str) -> None:
        """A kubelet renews its node's Lease in kube-node-lease (kept as the renew time)."""
        self.leases[name] = self.loop.now

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def generate_name(self, prefix: str) -> str:
        rng = self.loop.rng
        return prefix + "".join(rng.choice(ALPHABET) for _ in range(5))

    def create(self, resource: str, obj: Obj, *, uid: str | None = None) -> Obj:
        """POST: fill in server fields, default the pod, store, emit ADDED."""
        meta = dict(obj["metadata"])
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = self.generate_name(meta["generateName"])
        namespaced = NAMESPACED[resource]
        if namespaced:
            meta.setdefault("namespace", "default")
        key = (meta.get("namespace", ""), meta["name"])
        store = self.stores[resource]
        if key in store.objects:
            raise ApiError(
                409,
                "AlreadyExists",
                f'{resource} "{meta["name"]}" already exists',
                {"name": meta["name"], "kind": resource},
            )
        now = self.loop.now
        ordered: Obj = {"name": meta.pop("name")}
        if "generateName" in meta:
            ordered["generateName"] = meta.pop("generateName")
        if namespaced:
            ordered["namespace"] = meta.pop("namespace")
        if resource == "pods" and self.pod_quotas:
            self._admit_quota(ordered["namespace"], ordered["name"])
        ordered["uid"] = uid or meta.pop("uid", None) or new_uid(self.loop.rng)
        meta.pop("uid", None)
        self.rv += 1  # _next_rv(), inlined on the write path
        ordered["resourceVersion"] = str(self.rv)
        ordered["creationTimestamp"] = stamp(now)
        meta.pop("resourceVersion", None)
        meta.pop("creationTimestamp", None)
        ordered.update(meta)
        new = {**obj, "metadata": ordered}
        if resource == "pods":
            new = _default_pod(new)
        store.objects[key] = new
        if resource == "pods":
            node_name = new["spec"].get("nodeName")
            if node_name:
                self.pods_by_node.setdefault(node_name, {})[key] = new
            if new["status"].get("phase") in TERMINAL:
                self.terminal_pods += 1
        elif resource == "events":
            self._event_expiry.append((now + self.event_ttl, key))
        self._emit(resource, "ADDED", new)
        return new

    def set_pod_quota(self, namespace: str, name: str, pods: int) -> None:
        """A ResourceQuota ``name`` with ``hard: {pods: N}`` in ``namespace``."""
        self.pod_quotas[namespace] = (name, pods)

    def _admit_quota(self, namespace: str, name: str) -> None:
        """The ResourceQuota admission plugin (plugin/pkg/admission/resourcequota, every
        version) for the pod count: pods not Succeeded/Failed count (the quota's pod
        evaluator); one more than ``hard`` is refused with its message. It runs after the
        name is generated (a validating plugin), so the message names the pod. Checked
        before the resourceVersion is taken: a refused create writes nothing."""
        quota = self.pod_quotas.get(namespace)
        if quota is None:
            return
        used = sum(
            1
            for (ns, _), pod in self.stores["pods"].objects.items()
            if ns == namespace and pod["status"].get("phase") not in TERMINAL
        )
        if used + 1 > quota[1]:
            raise ApiError(
                403,
                "Forbidden",
                f'pods "{name}" is forbidden: exceeded quota: {quota[0]}, requested: pods=1,'
                f" used: pods={used}, limited: pods={quota[1]}",
                {"name": name, "kind": "pods"},
            )

    def restore(self, resource: str, obj: Obj) -> Obj:
        """Store an object that was in etcd before any component started: no watch event.

        ``obj`` is complete (uid, creationTimestamp, status) but for its resourceVersion.
        Components learn such objects from their initial list (``Recording.start``,
        ``Scheduler.adopt``, ``Kubelet.adopt``), as informers starting on a running cluster do.
        """
        meta = obj["metadata"]
        meta["resourceVersion"] = self._next_rv()
        key = (meta.get("namespace", ""), meta["name"])
        self.stores[resource].objects[key] = obj
        if resource == "pods":
            node_name = obj["spec"].get("nodeName")
            if node_name:
                self.pods_by_node.setdefault(node_name, {})[key] = obj
            if obj["status"].get("phase") in TERMINAL:
                self.terminal_pods += 1
        # Watches cannot start before it: what happened earlier is compacted away.
        self.stores[resource].compacted = self.rv
        return obj

    def update(self, resource: str, new: Obj) -> Obj:
        """PUT of a whole object (status or spec); emits MODIFIED. Removes it when its last
        finalizer goes while it is being deleted."""
        meta = dict(new["metadata"])
        key = (meta.get("namespace", ""), meta["name"])
        store = self.stores[resource]
        old = store.objects.get(key)
        if old is None:
            raise not_found(resource, meta["name"])
        self.rv += 1  # _next_rv(), inlined on the write path
        meta["resourceVersion"] = str(self.rv)
        new = {**new, "metadata": meta}
        if (
            meta.get("deletionTimestamp")
            and meta.get("deletionGracePeriodSeconds") == 0
            and not meta.get("finalizers")
        ):
            return self._remove(resource, key, new)
        if resource == "events":
            self._event_written[key] = self.loop.now
        store.objects[key] = new
        if resource == "pods":
            node_name = new["spec"].get("nodeName")
            if node_name:
                self.pods_by_node.setdefault(node_name, {})[key] = new
            self.terminal_pods += (new["status"].get("phase") in TERMINAL) - (
                old["status"].get("phase") in TERMINAL
            )
        self._emit(resource, "MODIFIED", new, old)
        return new

    def bind(self, namespace: str, name: str, node_name: str) -> Obj:
        """pods/{name}/binding: set nodeName and PodScheduled=True; 409 if bound or deleting."""
        pod = self.get("pods", namespace, name)
        spec = pod["spec"]
        if spec.get("nodeName"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is '
                f'already assigned to node "{spec["nodeName"]}"',
                {"name": name, "group": "", "kind": "pods/binding"},
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is being '
                "deleted, cannot be assigned to a host",
                {"name": name, "group": "", "kind": "pods/binding"},
            )
        new = edit(pod, "spec", "status")
        new["spec"]["nodeName"] = node_name
        set_condition(new["status"], "PodScheduled", "True", self.loop.now)
        return self.update("pods", new)

    def delete(self, resource: str, namespace: str, name: str, grace: int | None = None) -> Obj:
        """DELETE with pod graceful-deletion semantics (registry/core/pod/strategy.go)."""
        key = (namespace, name)
        obj = self.stores[resource].objects.get(key)
        if obj is None:
            raise not_found(resource, name)
        if resource == "pods":
            if grace is None:
                grace = obj["spec"].get("terminationGracePeriodSeconds", 30)
            # Unbound or terminal pods are deleted at once, whatever grace was asked for.
            if not obj["spec"].get("nodeName") or obj["status"].get("phase") in (
                "Succeeded",
                "Failed",
            ):
                grace = 0
        else:
            grace = 0
        meta = obj["metadata"]
        finalizers = meta.get("finalizers")
        if grace == 0 and not finalizers:
            final = obj
            if self.graceful_deletes and resource == "pods":
                final = self._mark_deleted(key, obj)
            elif meta.get("deletionTimestamp"):
                final = edit(obj, "metadata")
                final["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._remove(resource, key, final)
        current = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") and current is not None and current <= grace:
            return obj
        new = edit(obj, "metadata")
        new["metadata"]["deletionTimestamp"] = stamp(self.loop.now + grace)
        new["metadata"]["deletionGracePeriodSeconds"] = grace
        return self.update(resource, new)

    def _mark_deleted(self, key: tuple[str, str], obj: Obj) -> Obj:
        """The MODIFIED a grace-0 pod delete sends first: deletionTimestamp now (moved back
        to the request time when a graceful delete set it later), grace 0."""
        new = edit(obj, "metadata")
        meta = new["metadata"]
        meta["deletionTimestamp"] = stamp(self.loop.now)
        meta["deletionGracePeriodSeconds"] = 0
        self.rv += 1
        meta["resourceVersion"] = str(self.rv)
        self.stores["pods"].objects[key] = new
        node_name = new["spec"].get("nodeName")
        if node_name:
            self.pods_by_node.setdefault(node_name, {})[key] = new
        self._emit("pods", "MODIFIED", new, obj)
        return new

    def _remove(self, resource: str, key: tuple[str, str], last: Obj) -> Obj:
        store = self.stores[resource]
        old = store.objects.pop(key, None)
        meta = dict(last["metadata"])
        self.rv += 1  # _next_rv(), inlined on the write path
        meta["resourceVersion"] = str(self.rv)
        final = {**last, "metadata": meta}
        if resource == "pods":
            node_name = final["spec"].get("nodeName")
            if node_name:
                on_node = self.pods_by_node.get(node_name)
                if on_node is not None:
                    on_node.pop(key, None)
            if old is not None and old["status"].get("phase") in TERMINAL:
                self.terminal_pods -= 1
        self._emit(resource, "DELETED", final, old)
        return final

    def _expire_events(self) -> None:
        """--event-ttl: events vanish (DELETED) an hour after their last write."""
        now = self.loop.now
        expiry = self._event_expiry
        objects = self.stores["events"].objects
        while expiry and expiry[0][0] <= now:
            _, key = expiry.popleft()
            obj = objects.get(key)
            if obj is None:
                continue
            last = self._event_written.get(key, 0.0)
            if last + self.event_ttl > now:
                expiry.append((last + self.event_ttl, key))
                continue
            self._event_written.pop(key, None)
            self._remove("events", key, obj)


_SPEC_DEFAULTS: tuple[tuple[str, Any], ...] = (
    ("restartPolicy", "Always"),
    ("terminationGracePeriodSeconds", 30),
    ("dnsPolicy", "ClusterFirst"),
    ("serviceAccountName", "default"),
    ("serviceAccount", "default"),
    ("securityContext", {}),
    ("schedulerName", "default-scheduler"),
    ("priority", 0),
    ("enableServiceLinks", True),
    ("preemptionPolicy", "PreemptLowerPriority"),
)


def _default_spec(spec: Obj) -> Obj:
    """API defaulting for pods POSTed without the fields clients usually leave out."""
    if "schedulerName" in spec and "priority" in spec:
        return spec
    spec = dict(spec)
    for key, value in _SPEC_DEFAULTS:
        if key not in spec:
            spec[key] = value
    containers = []
    for c in spec.get("containers") or ():
        c = dict(c)
        c.setdefault("resources", {})
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("imagePullPolicy", pull_policy(c.get("image", "")))
        containers.append(c)
    spec["containers"] = containers
    return spec


def _default_pod(pod: Obj) -> Obj:
    spec = add_default_tolerations(_default_spec(pod["spec"]))
    status = dict(pod.get("status") or {})
    status.setdefault("phase", "Pending")
    status.setdefault("qosClass", qos_class(spec))
    return {**pod, "spec": spec, "status": status}


def set_condition(
    status: Obj,
    type_: str,
    value: str,
    now: float,
    reason: str | None = None,
    message: str | None = None,
    probe: bool = False,
) -> bool:
    """podutil.UpdatePodCondition on a status dict already copied by the caller.

    lastTransitionTime only moves when the status value changes. Returns whether anything
    changed.
    """
    conditions = list(status.get("conditions") or ())
    cond: Obj = {"type": type_, "status": value}
    cond["lastProbeTime"] = stamp(now) if probe else None
    for i, old in enumerate(conditions):
        if old["type"] != type_:
            continue
        cond["lastTransitionTime"] = (
            old.get("lastTransitionTime") if old["status"] == value else stamp(now)
        )
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        if old == cond:
            return False
        conditions[i] = cond
        status["conditions"] = conditions
        return True
    cond["lastTransitionTime"] = stamp(now)
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    conditions.append(cond)
    status["conditions"] = conditions
    return True


def owner_ref(obj: Obj, *, controller: bool = True, block: bool = True) -> Obj:
    ref: Obj = {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": controller,
    }
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def ref_of(obj: Obj, field_path: str | None = None) -> Obj:
    """An ObjectReference, as event recorders build it."""
    meta = obj["metadata"]
    ref: Obj = {"kind": obj["kind"]}
    if meta.get("namespace"):
        ref["namespace"] = meta["namespace"]
    ref["name"] = meta["name"]
    ref["uid"] = meta["uid"]
    ref["apiVersion"] = obj["apiVersion"]
    ref["resourceVersion"] = meta.get("resourceVersion", "")
    if field_path:
        ref["fieldPath"] = field_path
    return ref


def status_of(err: ApiError) -> dict[str, Any]:
    return err.status()
