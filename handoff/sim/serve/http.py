"""HTTP for the simulated cluster: the request handler (``BaseHTTPRequestHandler``) that
parses a Kubernetes API request, meets the armed faults, calls the ``ClusterAPI`` verbs it is
served with (``self.server.sim``) and writes JSON, tables and chunked watch streams; plus the
simulator's own ``/_sim/faults`` and ``/_sim/clock`` endpoints."""

from __future__ import annotations

import contextlib
import select
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from handoff.core.resources import KIND_OF
from handoff.sim.components.apiserver import ApiError, expired
from handoff.sim.objects import Obj
from handoff.sim.serve.api import ClusterAPI
from handoff.sim.serve.discovery import TABLE, discovery
from handoff.sim.serve.faults import Fault, FaultSpecError, parse_faults
from handoff.sim.serve.routes import Route, parse_path
from handoff.sim.serve.selectors import FieldSelector, LabelSelector
from handoff.sim.serve.tables import table


class APIHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that carries the ``ClusterAPI`` its handlers answer for."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], sim: ClusterAPI) -> None:
        self.sim = sim
        super().__init__(address, Handler)


class Handler(BaseHTTPRequestHandler):
    """One request (or one watch stream) of the simulated API server."""

    server: APIHTTPServer
    protocol_version = "HTTP/1.1"

    @property
    def sim(self) -> ClusterAPI:
        return self.server.sim

    def _address(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

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
        fault = self.sim.faults.take(verb, route.resource, version, path)
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
            raise expired(int_or_zero(params["resourceVersion"]), self.sim.api.rv)
        return fault

    def _fault_endpoint(self) -> None:
        """GET: armed faults and counters; POST: arm; DELETE: disarm (counters stay)."""
        if self.command == "POST":
            try:
                self.sim.faults.arm(parse_faults(self._body()))
            except FaultSpecError as exc:
                raise ApiError(400, "BadRequest", str(exc)) from exc
            self._json(201, self.sim.faults.state())
        elif self.command == "DELETE":
            self.sim.faults.clear()
            self._json(200, self.sim.faults.state())
        elif self.command == "GET":
            self._json(200, self.sim.faults.state())
        else:
            raise ApiError(405, "MethodNotAllowed", f"{self.command} {FAULTS_PATH}")

    def _clock_endpoint(self) -> None:
        """GET: the clock; POST {"running": true|false}: resume or pause it."""
        if self.command == "GET":
            self._json(200, self.sim.clock())
        elif self.command == "POST":
            body = self._body()
            unknown = sorted(set(body) - {"running"})
            if unknown:
                raise ApiError(400, "BadRequest", f"unknown clock field(s): {', '.join(unknown)}")
            running = body.get("running")
            if not isinstance(running, bool):
                raise ApiError(
                    400,
                    "BadRequest",
                    f"running must be true or false, not {orjson.dumps(running).decode()}"
                    if "running" in body
                    else "running is required (true to run the clock, false to pause it)",
                )
            self._json(200, self.sim.resume() if running else self.sim.pause())
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
        fixed = discovery(self._address())
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
            self._json(200, self.sim.scale(route))
        elif route.name is not None:
            obj = self.sim.get(route)
            if self._wants_table():
                self._json(
                    200,
                    table(
                        route.resource,
                        [obj],
                        obj["metadata"]["resourceVersion"],
                        self.sim.cluster.now,
                    ),
                )
            else:
                self._json(200, obj)
        else:
            listed = self.sim.list(route, fields, labels)
            if self._wants_table():
                objs = [dict(o, kind=_kind(route), apiVersion=route.group) for o in listed["items"]]
                self._json(
                    200,
                    table(
                        route.resource,
                        objs,
                        listed["metadata"]["resourceVersion"],
                        self.sim.cluster.now,
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
            error = expired(since, self.sim.api.rv)
            self._chunk(orjson.dumps({"type": "ERROR", "object": error.status()}) + b"\n")
            self._chunk(b"")
            return
        events = self.sim.watch(
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
                        self.sim.cluster.now,
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
        while not self.sim.stopping.is_set() and time.monotonic() < end:
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
            created = self.sim.create_pod(route.namespace, self._body())
        elif route.resource == "deployments":
            created = self.sim.create_deployment(route.namespace, self._body())
        else:
            raise ApiError(405, "MethodNotAllowed", "only pods and deployments can be created")
        self._json(201, created)

    def _patch(self, path: str, params: dict[str, str]) -> None:
        route = self._named(path, "PATCH")
        content_type = self.headers.get("Content-Type") or ""
        if route.subresource == "scale":
            self._json(200, self.sim.update_scale(route, self._raw_json(), content_type))
        else:
            self._json(200, self.sim.patch(route, content_type, self._raw_json()))

    def _put(self, path: str, params: dict[str, str]) -> None:
        route = self._named(path, "PUT")
        if route.subresource == "scale":
            self._json(200, self.sim.update_scale(route, self._body()))
        else:
            self._json(200, self.sim.replace(route, self._body()))

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
            result = self.sim.delete_pod(
                route.namespace, route.name, None if grace is None else int(grace)
            )
        elif route.resource in ("deployments", "jobs"):
            result = self.sim.delete_workload(route)
        else:
            raise ApiError(
                405, "MethodNotAllowed", "only pods, deployments and jobs can be deleted"
            )
        self._json(200, result)


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
    return KIND_OF[route.resource]
