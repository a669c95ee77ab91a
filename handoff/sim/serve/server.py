"""The simulated cluster over HTTP: enough of the Kubernetes API for clients and kubectl.

Discovery (/version, /api, /apis), list and watch of pods, nodes and events (core/v1 and
events.k8s.io/v1), get/create/delete of pods. The simulation runs in its own thread, paced
against the wall clock; every request takes the same lock, so handlers see a consistent
store. Watches are fed by store subscriptions through a queue per connection.

The clock can be paused (``/_sim/clock``): virtual time holds, the API keeps answering, and
on resume pacing goes on from where it stopped.
"""

from __future__ import annotations

import contextlib
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from handoff.sim.cluster import Cluster
from handoff.sim.components.apiserver import ApiError, APIServer, expired
from handoff.sim.components.events import view
from handoff.sim.objects import Obj
from handoff.sim.serve.discovery import KIND, RESOURCES, SUBRESOURCES, TABLE, discovery
from handoff.sim.serve.faults import Fault, FaultInjector, FaultSpecError, parse_faults
from handoff.sim.serve.patches import PatchError, UnsupportedPatch, apply_patch
from handoff.sim.serve.selectors import FieldSelector, LabelSelector
from handoff.sim.serve.tables import table
from handoff.sim.serve.updates import (
    MUTABLE_METADATA,
    check_deployment_update,
    check_node_update,
    check_pod_update,
    workload_body,
)


@dataclass
class Route:
    group: str  # "v1" or "events.k8s.io/v1"
    resource: str
    namespace: str | None
    name: str | None
    watch_path: bool = False
    subresource: str | None = None  # "scale" of a Deployment


def parse_path(path: str) -> Route | None:
    """/api/v1/[watch/][namespaces/NS/]RESOURCE[/NAME] and /apis/GROUP/VERSION/..."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis" and f"{parts[1]}/{parts[2]}" in RESOURCES:
        group, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    namespace = None
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    subresource = None
    if len(rest) == 3 and f"{rest[0]}/{rest[2]}" in SUBRESOURCES and not watch_path:
        subresource, rest = rest[2], rest[:2]
    if not rest or len(rest) > 2:
        return None
    resource = rest[0]
    if resource not in {r["name"] for r in RESOURCES[group]}:
        return None
    name = rest[1] if len(rest) == 2 else None
    return Route(group, resource, namespace, name, watch_path, subresource)


@dataclass
class Watcher:
    route: Route
    fields: FieldSelector
    labels: LabelSelector
    bookmarks: bool
    events: queue.Queue[tuple[str, Obj] | None] = field(default_factory=queue.Queue)


class SimServer:
    """Owns the simulation thread, the lock and the HTTP server."""

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 0,
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
        self.httpd = ThreadingHTTPServer((host, port), _handler_for(self))
        self.httpd.daemon_threads = True
        self.cluster.loop.every(bookmark_every, self._bookmark)
        self._threads: list[threading.Thread] = []
        self.faults = FaultInjector(lambda: self.cluster.loop.elapsed, self.compact)
        # The pacing origin: virtual ``_virtual0`` was at monotonic ``_wall0``. Both are
        # re-anchored on resume, so a pause is not made up for by a jump. Under ``lock``.
        self._running = not paused
        self._wall0 = time.monotonic()
        self._virtual0 = cluster.loop.elapsed

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        for target in (self._simulate, self.httpd.serve_forever):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            for watcher in self.watchers:
                watcher.events.put(None)

    def _simulate(self) -> None:
        """Advance virtual time in step with the wall clock (times ``speed``), unless paused.

        The running flag is read under the lock that ``pause`` takes, so once ``pause``
        returns no callback runs and virtual time holds exactly."""
        loop = self.cluster.loop
        with self.lock:
            self._anchor()
        while not self.stopping.is_set():
            with self.lock:
                if self._running:
                    target = self._virtual0 + (time.monotonic() - self._wall0) * self.speed
                    if self.duration is not None:
                        target = min(target, self.duration)
                    loop.run(until=target)
            self.stopping.wait(0.01)

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

    def write_kubeconfig(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        name = self.cluster.config.name
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: {name}\n  cluster:\n    server: {self.address}\n"
            f"users:\n- name: {name}\n  user:\n    token: handoff-sim\n"
            f"contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n"
            "    namespace: default\n"
            f"current-context: {name}\n"
        )
        return path

    # --- list and watch --------------------------------------------------------------------

    def list(self, route: Route, fields: FieldSelector, labels: LabelSelector) -> Obj:
        with self.lock:
            items, rv = self.api.list(route.resource, route.namespace)
            items = [self._out(route, o) for o in items if _matches(o, fields, labels, route)]
        return {
            "kind": KIND[route.resource] + "List",
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

    # --- pods ------------------------------------------------------------------------------

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
    kind = KIND[route.resource]
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


# --- HTTP ------------------------------------------------------------------------------------


def _handler_for(server: SimServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self._dispatch(self._get)

        def do_POST(self) -> None:
            self._dispatch(self._post)

        def do_DELETE(self) -> None:
            self._dispatch(self._delete)

        def do_PATCH(self) -> None:
            self._dispatch(self._patch)

        def do_PUT(self) -> None:
            self._dispatch(self._put)

        def _dispatch(self, fn: Callable[[str, dict[str, str]], None]) -> None:
            url = urlsplit(self.path)
            params = {k: v[-1] for k, v in parse_qs(url.query).items()}
            self._fault: Fault | None = None
            try:
                if url.path.rstrip("/") == FAULTS_PATH:
                    self._fault_endpoint()
                    return
                if url.path.rstrip("/") == CLOCK_PATH:
                    self._clock_endpoint()
                    return
                self._fault = self._meet_fault(url.path, params)
                fn(url.path, params)
            except ApiError as err:
                self._json(err.code, err.status(), err.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass
            except Exception as exc:
                error = ApiError(500, "InternalError", f"simulator error: {exc!r}")
                self._json(500, error.status())

        def _meet_fault(self, path: str, params: dict[str, str]) -> Fault | None:
            """Take the fault armed for this request; answer it here when it is an HTTP
            error (429, 5xx, a list's 410), else hand it to the watch."""
            route = parse_path(path)
            if route is None:
                return None
            verb = _verb(self.command, route, params)
            version = params.get("resourceVersion") not in (None, "", "0")
            fault = server.faults.take(verb, route.resource, version, path)
            if fault is None:
                return None
            if fault.fault == "throttle":
                raise ApiError(
                    429,
                    "TooManyRequests",
                    "Too many requests, please try again later.",
                    {"retryAfterSeconds": fault.retry_after},
                    headers={"Retry-After": str(fault.retry_after)},
                )
            if fault.fault == "error":
                reason, message = ERROR_STATUS[fault.code]
                raise ApiError(fault.code, reason, message)
            if fault.fault == "expire" and verb == "list":
                raise expired(int_or_zero(params["resourceVersion"]), server.api.rv)
            return fault

        def _fault_endpoint(self) -> None:
            """GET: armed faults and counters; POST: arm; DELETE: disarm (counters stay)."""
            if self.command == "POST":
                try:
                    server.faults.arm(parse_faults(self._body()))
                except FaultSpecError as exc:
                    raise ApiError(400, "BadRequest", str(exc)) from exc
                self._json(201, server.faults.state())
            elif self.command == "DELETE":
                server.faults.clear()
                self._json(200, server.faults.state())
            elif self.command == "GET":
                self._json(200, server.faults.state())
            else:
                raise ApiError(405, "MethodNotAllowed", f"{self.command} {FAULTS_PATH}")

        def _clock_endpoint(self) -> None:
            """GET: the clock; POST {"running": true|false}: resume or pause it."""
            if self.command == "GET":
                self._json(200, server.clock())
            elif self.command == "POST":
                body = self._body()
                unknown = sorted(set(body) - {"running"})
                if unknown:
                    raise ApiError(
                        400, "BadRequest", f"unknown clock field(s): {', '.join(unknown)}"
                    )
                running = body.get("running")
                if not isinstance(running, bool):
                    raise ApiError(
                        400,
                        "BadRequest",
                        f"running must be true or false, not {orjson.dumps(running).decode()}"
                        if "running" in body
                        else "running is required (true to run the clock, false to pause it)",
                    )
                self._json(200, server.resume() if running else server.pause())
            else:
                raise ApiError(405, "MethodNotAllowed", f"{self.command} {CLOCK_PATH}")

        def _raw_json(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b"{}"
            try:
                return orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                raise ApiError(400, "BadRequest", f"the body is not JSON: {exc}") from exc

        def _body(self) -> Obj:
            body = self._raw_json()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body must be a JSON object")
            return body

        def _json(self, code: int, obj: Obj, headers: dict[str, str] | None = None) -> None:
            data = orjson.dumps(obj)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _wants_table(self) -> bool:
            return TABLE in (self.headers.get("Accept") or "")

        def _get(self, path: str, params: dict[str, str]) -> None:
            fixed = discovery(server.address)
            if path.rstrip("/") in fixed or path in fixed:
                body = fixed.get(path.rstrip("/") or path)
                if body is None:
                    self._text(200, b"ok")
                else:
                    self._json(200, body)
                return
            route = parse_path(path)
            if route is None:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            fields = FieldSelector.parse(params.get("fieldSelector", ""))
            labels = LabelSelector.parse(params.get("labelSelector", ""))
            if route.watch_path or params.get("watch") in ("1", "true", "True"):
                self._stream(route, fields, labels, params)
            elif route.subresource == "scale":
                self._json(200, server.scale(route))
            elif route.name is not None:
                obj = server.get(route)
                if self._wants_table():
                    self._json(
                        200,
                        table(
                            route.resource,
                            [obj],
                            obj["metadata"]["resourceVersion"],
                            server.cluster.now,
                        ),
                    )
                else:
                    self._json(200, obj)
            else:
                listed = server.list(route, fields, labels)
                if self._wants_table():
                    objs = [
                        dict(o, kind=_kind(route), apiVersion=route.group) for o in listed["items"]
                    ]
                    self._json(
                        200,
                        table(
                            route.resource,
                            objs,
                            listed["metadata"]["resourceVersion"],
                            server.cluster.now,
                        ),
                    )
                else:
                    self._json(200, listed)

        def _text(self, code: int, data: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(
            self, route: Route, fields: FieldSelector, labels: LabelSelector, params: dict[str, str]
        ) -> None:
            timeout = float(params.get("timeoutSeconds") or 1800)
            deadline = time.monotonic() + timeout
            as_table = self._wants_table()
            fault = self._fault
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if fault is not None and fault.fault == "expire":
                since = int_or_zero(params.get("resourceVersion"))
                error = expired(since, server.api.rv)
                self._chunk(orjson.dumps({"type": "ERROR", "object": error.status()}) + b"\n")
                self._chunk(b"")
                return
            events = server.watch(
                route,
                fields,
                labels,
                params.get("resourceVersion"),
                params.get("allowWatchBookmarks") in ("1", "true", "True"),
                params.get("sendInitialEvents") in ("1", "true", "True"),
            )
            sent = 0
            try:
                for type_, obj in events:
                    if time.monotonic() > deadline:
                        break
                    if fault is not None and fault.fault == "stall-watch" and sent >= fault.after:
                        events.close()
                        if fault.seconds is not None:
                            deadline = time.monotonic() + fault.seconds
                        self._stall(deadline)
                        return
                    if not type_:
                        continue
                    if as_table and type_ in ("ADDED", "MODIFIED", "DELETED"):
                        obj = table(
                            route.resource,
                            [obj],
                            obj["metadata"]["resourceVersion"],
                            server.cluster.now,
                        )
                    line = orjson.dumps({"type": type_, "object": obj}) + b"\n"
                    if fault is not None and fault.fault == "cut-watch" and sent >= fault.after:
                        self._cut(line)
                        return
                    self._chunk(line)
                    sent += 1
                    if type_ == "ERROR":
                        break
            finally:
                events.close()
            self._chunk(b"")

        def _cut(self, line: bytes) -> None:
            """Announce the whole line as a chunk, send half of it, and drop the connection."""
            self.wfile.write(f"{len(line):x}\r\n".encode() + line[: len(line) // 2])
            self.wfile.flush()
            self._drop()

        def _stall(self, end: float) -> None:
            """Say nothing, connection open, until the client leaves, the monotonic ``end``
            or the server stops; then drop the connection."""
            sock = self.connection
            while not server.stopping.is_set() and time.monotonic() < end:
                readable, _, _ = select.select([sock], [], [], 0.2)
                if not readable:
                    continue
                try:
                    if not sock.recv(1, socket.MSG_PEEK):
                        break  # the client closed its end
                except OSError:
                    break
                time.sleep(0.2)
            self._drop()

        def _drop(self) -> None:
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _post(self, path: str, params: dict[str, str]) -> None:
            route = parse_path(path)
            if route is None or route.name or not route.namespace:
                raise ApiError(405, "MethodNotAllowed", "create needs a namespaced collection")
            if route.watch_path or route.subresource:
                raise ApiError(405, "MethodNotAllowed", "create needs a namespaced collection")
            if route.resource == "pods":
                created = server.create_pod(route.namespace, self._body())
            elif route.resource == "deployments":
                created = server.create_deployment(route.namespace, self._body())
            else:
                raise ApiError(405, "MethodNotAllowed", "only pods and deployments can be created")
            self._json(201, created)

        def _patch(self, path: str, params: dict[str, str]) -> None:
            route = self._named(path, "PATCH")
            content_type = self.headers.get("Content-Type") or ""
            if route.subresource == "scale":
                self._json(200, server.update_scale(route, self._raw_json(), content_type))
            else:
                self._json(200, server.patch(route, content_type, self._raw_json()))

        def _put(self, path: str, params: dict[str, str]) -> None:
            route = self._named(path, "PUT")
            if route.subresource == "scale":
                self._json(200, server.update_scale(route, self._body()))
            else:
                self._json(200, server.replace(route, self._body()))

        def _named(self, path: str, verb: str) -> Route:
            route = parse_path(path)
            if route is None or not route.name or route.watch_path:
                raise ApiError(405, "MethodNotAllowed", f"{verb} needs an object's path")
            if route.resource not in UPDATABLE:
                raise ApiError(
                    405,
                    "MethodNotAllowed",
                    f"the simulator does not take {verb} of {route.resource}",
                )
            return route

        def _delete(self, path: str, params: dict[str, str]) -> None:
            route = parse_path(path)
            if (
                route is None
                or not route.name
                or not route.namespace
                or route.watch_path
                or route.subresource
            ):
                raise ApiError(405, "MethodNotAllowed", "delete needs a namespaced object")
            body = self._body()
            if route.resource == "pods":
                grace = body.get("gracePeriodSeconds", params.get("gracePeriodSeconds"))
                result = server.delete_pod(
                    route.namespace, route.name, None if grace is None else int(grace)
                )
            elif route.resource in ("deployments", "jobs"):
                result = server.delete_workload(route)
            else:
                raise ApiError(
                    405, "MethodNotAllowed", "only pods, deployments and jobs can be deleted"
                )
            self._json(200, result)

    return Handler


FAULTS_PATH = "/_sim/faults"
CLOCK_PATH = "/_sim/clock"
UPDATABLE = ("pods", "nodes", "deployments")
ERROR_STATUS = {
    500: ("InternalError", "Internal error occurred: injected by the simulator"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}


def _verb(method: str, route: Route, params: dict[str, str]) -> str:
    if method == "GET":
        if route.watch_path or params.get("watch") in ("1", "true", "True"):
            return "watch"
        return "list" if route.name is None else "get"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )


def int_or_zero(text: str | None) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


def _kind(route: Route) -> str:
    return KIND[route.resource]
