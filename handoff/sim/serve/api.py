"""The simulated cluster's API as a client sees it: the verbs (list, watch, get, create,
update, patch, delete, the scale subresource), each under one lock so every request sees a
consistent store, and the clock that paces virtual time against the wall clock.

Watches are fed by store subscriptions through a queue per connection. The clock can be
paused (``/_sim/clock``): virtual time holds, the API keeps answering, and on resume pacing
goes on from where it stopped. ``serve.http`` speaks HTTP for it; ``serve.server`` runs it.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from handoff.core.resources import KIND_OF
from handoff.sim.cluster import Cluster
from handoff.sim.components.apiserver import ApiError, APIServer
from handoff.sim.components.events import view
from handoff.sim.objects import Obj
from handoff.sim.serve.faults import FaultInjector, FaultSpecError
from handoff.sim.serve.patches import PatchError, UnsupportedPatch, apply_patch
from handoff.sim.serve.routes import Route
from handoff.sim.serve.selectors import FieldSelector, LabelSelector
from handoff.sim.serve.updates import (
    MUTABLE_METADATA,
    check_deployment_update,
    check_node_update,
    check_pod_update,
    workload_body,
)


@dataclass
class Watcher:
    route: Route
    fields: FieldSelector
    labels: LabelSelector
    bookmarks: bool
    events: queue.Queue[tuple[str, Obj] | None] = field(default_factory=queue.Queue)


class ClusterAPI:
    """The verbs and the clock of one simulated cluster, shared by every request thread."""

    def __init__(
        self,
        cluster: Cluster,
        speed: float = 1.0,
        bookmark_every: float = 60.0,
        duration: float | None = None,
        paused: bool = False,
    ) -> None:
        self.cluster = cluster
        self.api: APIServer = cluster.api
        self.lock = threading.RLock()
        self.speed = speed
        self.duration = duration
        self.stopping = threading.Event()
        self.watchers: list[Watcher] = []
        self.cluster.loop.every(bookmark_every, self._bookmark)
        self.faults = FaultInjector(lambda: self.cluster.loop.elapsed, self.compact)
        # The pacing origin: virtual ``_virtual0`` was at monotonic ``_wall0``. Both are
        # re-anchored on resume, so a pause is not made up for by a jump. Under ``lock``.
        self._running = not paused
        self._wall0 = time.monotonic()
        self._virtual0 = cluster.loop.elapsed

    def advance(self) -> None:
        """One pacing step: run virtual time up to where the wall clock (times ``speed``)
        says it should be, unless paused. The running flag is read under the lock that
        ``pause`` takes, so once ``pause`` returns no callback runs and virtual time holds
        exactly."""
        with self.lock:
            if self._running:
                target = self._virtual0 + (time.monotonic() - self._wall0) * self.speed
                if self.duration is not None:
                    target = min(target, self.duration)
                self.cluster.loop.run(until=target)

    def compact(self, resource: str) -> int:
        """Drop the history of ``resource`` (``*``: all) up to now, as an etcd compaction
        does: watches from any older resourceVersion get 410 from then on."""
        if resource != "*" and resource not in self.api.stores:
            raise FaultSpecError(f"no resource {resource!r} to compact")
        with self.lock:
            for name, store in self.api.stores.items():
                if resource in ("*", name):
                    store.history.clear()
                    store.compacted = self.api.rv
            return self.api.rv

    def list(self, route: Route, fields: FieldSelector, labels: LabelSelector) -> Obj:
        with self.lock:
            items, rv = self.api.list(route.resource, route.namespace)
            items = [self._out(route, o) for o in items if _matches(o, fields, labels, route)]
        return {
            "kind": KIND_OF[route.resource] + "List",
            "apiVersion": route.group,
            "metadata": {"resourceVersion": str(rv)},
            "items": [_itemless(o) for o in items],
        }

    def _out(self, route: Route, obj: Obj) -> Obj:
        return view(obj, route.group) if route.resource == "events" else obj

    def watch(
        self,
        route: Route,
        fields: FieldSelector,
        labels: LabelSelector,
        since: str | None,
        bookmarks: bool,
        initial_events: bool,
    ) -> Iterator[tuple[str, Obj]]:
        """Events for one watch request; the first may be an ERROR (410)."""
        watcher = Watcher(route, fields, labels, bookmarks)

        def handle(type_: str, obj: Obj) -> None:
            if _matches(obj, fields, labels, route):
                watcher.events.put((type_, self._out(route, obj)))

        with self.lock:
            backlog: list[tuple[str, Obj]] = []
            if initial_events or since in (None, "", "0"):
                items, rv = self.api.list(route.resource, route.namespace)
                backlog = [
                    ("ADDED", self._out(route, o))
                    for o in items
                    if _matches(o, fields, labels, route)
                ]
                if initial_events and bookmarks:
                    backlog.append(("BOOKMARK", _bookmark(route, rv, initial_end=True)))
            else:
                try:
                    changes = self.api.history_since(route.resource, int(since))
                except (ApiError, ValueError) as exc:
                    error = (
                        exc
                        if isinstance(exc, ApiError)
                        else ApiError(400, "BadRequest", f"invalid resourceVersion {since!r}")
                    )
                    yield "ERROR", error.status()
                    return
                backlog = [
                    (c.type, self._out(route, c.obj))
                    for c in changes
                    if _matches(c.obj, fields, labels, route)
                ]
            sub = self.api.subscribe(route.resource, handle, namespace=route.namespace)
            self.watchers.append(watcher)
        try:
            yield from backlog
            while not self.stopping.is_set():
                try:
                    item = watcher.events.get(timeout=0.5)
                except queue.Empty:
                    yield "", {}  # a heartbeat so the handler can notice timeouts
                    continue
                if item is None:
                    return
                yield item
        finally:
            with self.lock:
                self.api.unsubscribe(sub)
                if watcher in self.watchers:
                    self.watchers.remove(watcher)

    def _bookmark(self) -> None:
        rv = self.api.rv
        for watcher in self.watchers:
            if watcher.bookmarks:
                watcher.events.put(("BOOKMARK", _bookmark(watcher.route, rv)))

    def get(self, route: Route) -> Obj:
        with self.lock:
            return self._out(
                route, self.api.get(route.resource, route.namespace or "", route.name or "")
            )

    def create_pod(self, namespace: str, body: Obj) -> Obj:
        if body.get("kind", "Pod") != "Pod" or not isinstance(body.get("spec"), dict):
            raise ApiError(400, "BadRequest", "the body must be a Pod with a spec")
        meta = dict(body.get("metadata") or {})
        if meta.get("namespace", namespace) != namespace:
            raise ApiError(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace "
                "sent on the request",
            )
        meta["namespace"] = namespace
        if not meta.get("name") and not meta.get("generateName"):
            raise ApiError(422, "Invalid", "Pod is invalid: metadata.name: Required value")
        pod = {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": body["spec"]}
        with self.lock:
            return self.api.create("pods", pod)

    def patch(self, route: Route, content_type: str, body: Any) -> Obj:
        """PATCH: apply the body to the stored object, then update it as a PUT would."""
        with self.lock:
            old = self.api.get(route.resource, route.namespace or "", route.name or "")
            try:
                new = apply_patch(old, content_type, body)
            except UnsupportedPatch as exc:
                raise ApiError(415, "UnsupportedMediaType", str(exc)) from exc
            except PatchError as exc:
                raise ApiError(422, "Invalid", str(exc)) from exc
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise ApiError(422, "Invalid", "the patched object has no metadata")
            return self.update(route, old, new)

    def replace(self, route: Route, body: Obj) -> Obj:
        """PUT of the whole object."""
        meta = body.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(400, "BadRequest", "the body must be an object with metadata")
        if meta.get("name") != route.name:
            raise ApiError(
                400,
                "BadRequest",
                f"the name of the object ({meta.get('name')}) does not match the name on the "
                f"URL ({route.name})",
            )
        with self.lock:
            old = self.api.get(route.resource, route.namespace or "", route.name or "")
            return self.update(route, old, body)

    def update(self, route: Route, old: Obj, new: Obj) -> Obj:
        """The API server's update: optimistic concurrency on resourceVersion (409), the
        mutable metadata, the resource's validation; status belongs to its subresource."""
        meta = new.get("metadata") or {}
        wanted = meta.get("resourceVersion")
        old_meta = old["metadata"]
        if wanted not in (None, "") and str(wanted) != old_meta["resourceVersion"]:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {route.resource} "{old_meta["name"]}": the '
                "object has been modified; please apply your changes to the latest version "
                "and try again",
                {"name": old_meta["name"], "kind": route.resource},
            )
        merged = dict(old_meta)
        for key in MUTABLE_METADATA:
            value = meta.get(key)
            if value in (None, {}, []):
                merged.pop(key, None)
            elif not isinstance(value, dict | list):
                raise ApiError(422, "Invalid", f"metadata.{key}: Invalid value: {value!r}")
            else:
                merged[key] = value
        spec = new.get("spec", old.get("spec"))
        if route.resource == "pods":
            check_pod_update(old, spec)
        elif route.resource == "nodes":
            check_node_update(old, spec)
        elif route.resource == "deployments":
            check_deployment_update(old, spec)
        updated = {**old, "metadata": merged}
        if "spec" in old:
            updated["spec"] = spec
        if updated == old:
            return old  # a no-op update writes nothing, as the API server skips it
        if route.resource == "deployments":
            return self.cluster.deployments.update_object(updated)
        return self.api.update(route.resource, updated)

    def create_deployment(self, namespace: str, body: Obj) -> Obj:
        """POST of an apps/v1 Deployment: validated, then handed to the deployment-controller."""
        name, meta, spec = workload_body(body, "Deployment", namespace)
        template = spec.get("template")
        if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
            raise ApiError(
                422,
                "Invalid",
                f'Deployment.apps "{name}" is invalid: spec.template.spec: Required value',
            )
        selector = (spec.get("selector") or {}).get("matchLabels")
        labels = (template.get("metadata") or {}).get("labels") or {}
        if not isinstance(selector, dict) or not selector:
            raise ApiError(
                422,
                "Invalid",
                f'Deployment.apps "{name}" is invalid: spec.selector: Required value',
            )
        if any(labels.get(k) != v for k, v in selector.items()):
            raise ApiError(
                422,
                "Invalid",
                f'Deployment.apps "{name}" is invalid: spec.template.metadata.labels: Invalid '
                f"value: {orjson.dumps(labels).decode()}: `selector` does not match template "
                "`labels`",
            )
        replicas = spec.get("replicas", 1)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ApiError(
                422,
                "Invalid",
                f'Deployment.apps "{name}" is invalid: spec.replicas: Invalid value: '
                f"{replicas!r}: must be greater than or equal to 0",
            )
        with self.lock:
            if self.api.find("deployments", namespace, name) is not None:
                raise ApiError(
                    409,
                    "AlreadyExists",
                    f'deployments.apps "{name}" already exists',
                    {"name": name, "group": "apps", "kind": "deployments"},
                )
            dep = self.cluster.deployments.apply(namespace, name, template, replicas, meta)
            return dep.as_obj()

    def delete_workload(self, route: Route) -> Obj:
        """DELETE of a Deployment or Job: the object goes, the garbage collector takes
        what it owns (background propagation, kubectl's default)."""
        namespace, name = route.namespace or "", route.name or ""
        with self.lock:
            found = self.api.get(route.resource, namespace, name)
            if route.resource == "deployments":
                final = self.cluster.deployments.delete(namespace, name)
            else:
                final = self.cluster.jobs.delete(found["metadata"]["uid"])
            return final or found

    def scale(self, route: Route) -> Obj:
        """GET deployments/NAME/scale: an autoscaling/v1 Scale."""
        with self.lock:
            return scale_of(self.api.get("deployments", route.namespace or "", route.name or ""))

    def update_scale(self, route: Route, body: Any, content_type: str | None = None) -> Obj:
        """PATCH (``content_type`` given) or PUT of the scale subresource: what
        ``kubectl scale`` sends. Only ``spec.replicas`` is taken."""
        with self.lock:
            dep = self.api.get("deployments", route.namespace or "", route.name or "")
            current = scale_of(dep)
            if content_type is None:
                new = body
            else:
                try:
                    new = apply_patch(current, content_type, body)
                except UnsupportedPatch as exc:
                    raise ApiError(415, "UnsupportedMediaType", str(exc)) from exc
                except PatchError as exc:
                    raise ApiError(422, "Invalid", str(exc)) from exc
            wanted = ((new or {}).get("metadata") or {}).get("resourceVersion")
            if wanted not in (None, "") and str(wanted) != dep["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on deployments.apps "{route.name}": the '
                    "object has been modified; please apply your changes to the latest "
                    "version and try again",
                )
            replicas = ((new or {}).get("spec") or {}).get("replicas")
            if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
                raise ApiError(
                    422,
                    "Invalid",
                    f'Scale.autoscaling "{route.name}" is invalid: spec.replicas: Invalid '
                    f"value: {replicas!r}: must be greater than or equal to 0",
                )
            if replicas != dep["spec"].get("replicas"):
                spec = dict(dep["spec"], replicas=replicas)
                meta = dict(dep["metadata"])
                dep = self.cluster.deployments.update_object(
                    {**dep, "metadata": meta, "spec": spec}
                )
            return scale_of(dep)

    def delete_pod(self, namespace: str, name: str, grace: int | None) -> Obj:
        with self.lock:
            return self.api.delete("pods", namespace, name, grace)

    def _anchor(self) -> None:
        """Pace from here: virtual time now is where the loop stands."""
        self._wall0, self._virtual0 = time.monotonic(), self.cluster.loop.elapsed

    @property
    def running(self) -> bool:
        return self._running

    def pause(self) -> dict[str, Any]:
        """Hold virtual time where it is (the API keeps answering); returns the clock."""
        with self.lock:
            self._running = False
            return self.clock()

    def resume(self) -> dict[str, Any]:
        """Let virtual time run again from where it was held; returns the clock."""
        with self.lock:
            if not self._running:
                self._anchor()
                self._running = True
            return self.clock()

    def clock(self) -> dict[str, Any]:
        """What ``GET /_sim/clock`` answers: running or paused, virtual seconds since the
        start (the time faults' ``at`` counts in), the speed and the duration."""
        with self.lock:
            return {
                "running": self._running,
                "elapsed": self.cluster.loop.elapsed,
                "speed": self.speed,
                "duration": self.duration,
            }


def scale_of(dep: Obj) -> Obj:
    meta = dep["metadata"]
    selector = (dep["spec"].get("selector") or {}).get("matchLabels") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
            "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": dep["spec"].get("replicas", 1)},
        "status": {
            "replicas": (dep.get("status") or {}).get("replicas", 0),
            "selector": ",".join(f"{k}={v}" for k, v in selector.items()),
        },
    }


def _itemless(obj: Obj) -> Obj:
    """List items carry no kind/apiVersion, as the API server returns them."""
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _bookmark(route: Route, rv: int, initial_end: bool = False) -> Obj:
    kind = KIND_OF[route.resource]
    meta: Obj = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"kind": kind, "apiVersion": route.group, "metadata": meta}


def _matches(obj: Obj, fields: FieldSelector, labels: LabelSelector, route: Route) -> bool:
    meta = obj["metadata"]
    if route.namespace is not None and meta.get("namespace") != route.namespace:
        return False
    if route.name is not None and meta.get("name") != route.name:
        return False
    return fields.matches(obj) and labels.matches(meta.get("labels") or {})
