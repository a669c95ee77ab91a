"""``MirrorAPI``: the simulator's API server for kubelets attached to a real one.

Reads (``find``, ``pods_on``, subscriptions) answer from local copies of real objects; writes
go to the real API server first and its answer is stored. The real watch streams come in
through ``accept`` (in the loop's thread): a change already known from a write's answer
(same or older resourceVersion) is dropped, so a kubelet does not hear its own writes twice.
"""

from __future__ import annotations

import logging

from handoff.sim.attached.remote import Remote, merge_diff
from handoff.sim.clock import Loop
from handoff.sim.components.apiserver import ApiError, APIServer, not_found
from handoff.sim.objects import Obj

log = logging.getLogger(__name__)
# What a kubelet writes through its own subresource (the rest of the object is not its).
STATUS_OWNED = ("pods", "nodes")
MIRROR = "kubernetes.io/config.mirror"
# Writes whose failure the writer hears about (a scenario's pod, a kubelet's pod writes and
# its registration); any other failed write (an event, a node status, a workload, a lease)
# is logged and retried by its writer's next sync, as the real components do.
RAISING = ("pods",)


class MirrorAPI(APIServer):
    """An ``APIServer`` whose store mirrors a real API server's objects."""

    def __init__(self, loop: Loop, remote: Remote, history: int = 20000) -> None:
        super().__init__(loop, history=history)
        self.remote = remote

    # --- the real API server's changes ------------------------------------------------------

    def pull(self) -> int:
        """Take in every change the real watches delivered since the last pull."""
        changes = self.remote.changes()
        for resource, type_, obj in changes:
            self.accept(resource, type_, obj)
        return len(changes)

    def accept(self, resource: str, type_: str, obj: Obj) -> Obj | None:
        """Store a real object as it is (uid, resourceVersion and all) and tell the
        subscribers, unless the store already has this version or a newer one."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        store = self.stores[resource]
        old = store.objects.get(key)
        rv = int(meta.get("resourceVersion") or 0)
        if (
            old is not None
            and type_ != "DELETED"
            and old["metadata"]["uid"] == meta["uid"]
            and int(old["metadata"].get("resourceVersion") or 0) >= rv
        ):
            return old  # already known: the answer to our own write
        self.rv = max(self.rv, rv)
        if type_ == "DELETED":
            if old is None or old["metadata"]["uid"] != meta["uid"]:
                return None
            store.objects.pop(key, None)
            self._index(resource, key, None, old)
            self._emit(resource, "DELETED", obj, old)
            return obj
        store.objects[key] = obj
        self._index(resource, key, obj, old)
        self._emit(resource, "ADDED" if old is None else "MODIFIED", obj, old)
        return obj

    def _index(self, resource: str, key: tuple[str, str], new: Obj | None, old: Obj | None) -> None:
        if resource != "pods":
            return
        old_node = old["spec"].get("nodeName") if old is not None else None
        new_node = new["spec"].get("nodeName") if new is not None else None
        if old_node and old_node != new_node:
            self.pods_by_node.get(old_node, {}).pop(key, None)
        if new_node and new is not None:
            self.pods_by_node.setdefault(new_node, {})[key] = new

    # --- writes: the real API server first ---------------------------------------------------

    def create(self, resource: str, obj: Obj, *, uid: str | None = None) -> Obj:
        """POST to the real API server. A Node's status is posted after it, through the
        status subresource, as kubelet registration does."""
        if resource in RAISING or resource == "nodes":
            return self._create(resource, obj)
        try:
            return self._create(resource, obj)
        except ApiError as exc:
            log.warning("attached: creating %s failed: %s", resource, exc.message)
            return obj

    def _create(self, resource: str, obj: Obj) -> Obj:
        body = {k: v for k, v in obj.items() if not (resource == "nodes" and k == "status")}
        if resource == "pods" and MIRROR in (obj["metadata"].get("annotations") or {}):
            body["spec"] = _without_service_account(obj["spec"])
        created = self.remote.create(resource, body)
        if resource == "nodes":
            name = created["metadata"]["name"]
            self.remote.watch_node(name)
            created = self.remote.patch(
                "nodes", "", name, {"status": obj.get("status") or {}}, "status"
            )
        return self.accept(resource, "ADDED", created) or created

    def update(self, resource: str, new: Obj) -> Obj:
        """A PUT as a merge patch of what changed: the status through its subresource (the
        kubelet's writes), the rest (taints, labels) through the object."""
        if resource in RAISING:
            return self._update(resource, new)
        try:
            return self._update(resource, new)
        except ApiError as exc:
            log.warning("attached: updating %s failed: %s", resource, exc.message)
            return new

    def _update(self, resource: str, new: Obj) -> Obj:
        meta = new["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        old = self.stores[resource].objects.get(key)
        if old is None:
            raise not_found(resource, meta["name"])
        namespace, name = key
        result = old
        owned = resource in STATUS_OWNED
        status = merge_diff(old.get("status"), new.get("status")) if owned else {}
        if status not in ({}, None):
            result = self.remote.patch(resource, namespace, name, {"status": status}, "status")
        # The rest of the object: spec, labels and taints; for an Event, count, message and
        # lastTimestamp, which are top-level fields.
        rest = merge_diff(_writable(old, owned), _writable(new, owned))
        if rest:
            result = self.remote.patch(resource, namespace, name, rest)
        if result is old:
            return old
        return self.accept(resource, "MODIFIED", result) or result

    def delete(self, resource: str, namespace: str, name: str, grace: int | None = None) -> Obj:
        """DELETE on the real API server; the mirror learns the outcome from the watch
        (the MODIFIED with deletionTimestamp, then DELETED)."""
        obj = self.stores[resource].objects.get((namespace, name))
        uid = obj["metadata"]["uid"] if obj is not None else None
        try:
            final = self.remote.delete(resource, namespace, name, grace, uid)
        except ApiError as exc:
            if resource in RAISING:
                raise
            log.warning("attached: deleting %s %s failed: %s", resource, name, exc.message)
            final = None
        return final or obj or {"metadata": {"name": name, "namespace": namespace}}

    def renew_lease(self, name: str) -> None:
        super().renew_lease(name)
        try:
            self.remote.renew_lease(name, self.loop.now)
        except ApiError as exc:
            log.warning("attached: renewing the lease of %s failed: %s", name, exc.message)


def _without_service_account(spec: Obj) -> Obj:
    """A mirror pod's spec: the simulator's static manifests name the default service
    account, which the ServiceAccount admission plugin refuses on a mirror pod ("a mirror
    pod may not reference service accounts"); real static pods have none."""
    return {k: v for k, v in spec.items() if k not in ("serviceAccountName", "serviceAccount")}


SERVER_SET = ("resourceVersion", "managedFields", "creationTimestamp", "uid", "generation")


def _writable(obj: Obj, without_status: bool) -> Obj:
    """What of ``obj`` a client's patch may change: no kind or apiVersion, metadata without
    server-set fields, and no status where a subresource owns it."""
    out: Obj = {}
    for key, value in obj.items():
        if key in ("kind", "apiVersion") or (without_status and key == "status"):
            continue
        if key == "metadata":
            value = {k: v for k, v in value.items() if k not in SERVER_SET}
        out[key] = value
    return out
