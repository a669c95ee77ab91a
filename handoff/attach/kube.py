"""The attached simulator's ``Remote`` over HTTP: a real API server reached with a
kubeconfig (TLS, token or client certificate) through the ``kubernetes`` client's
``ApiClient``, with raw JSON in and out (no typed models: objects stay plain dicts, as the
simulator keeps them).

Writes are synchronous, from the simulation's thread. Each attached node has two watch
threads (its Node by ``metadata.name``, its pods by ``spec.nodeName``, as a kubelet's
informers); they list, then watch from the list's resourceVersion, relist on 410 Gone, and
queue what they see for ``changes()``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import urllib3
import yaml
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from handoff.core.resources import KIND_OF, RESOURCES, collection_path
from handoff.sim.attached.remote import Change
from handoff.sim.components.apiserver import ApiError
from handoff.sim.objects import Obj, micro

log = logging.getLogger(__name__)
LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_S = 40  # the kubelet's --node-lease-duration-seconds default
WATCH_SECONDS = 290  # a server-side watch timeout, under the API server's own maximum
RETRY_S = 1.0


class AttachError(Exception):
    """A kubeconfig or API server that cannot be used: one line, for the command."""


class KubeRemote:
    """A real API server, as the attached simulator's ``Remote``."""

    def __init__(self, kubeconfig: str, context: str | None = None, timeout: float = 15.0):
        try:
            self.client = k8s_config.new_client_from_config(config_file=kubeconfig, context=context)
        except (ConfigException, OSError, ValueError, TypeError, yaml.YAMLError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise AttachError(f"{kubeconfig}: not a usable kubeconfig: {why}") from exc
        self.server = self.client.configuration.host
        self.timeout = timeout
        self._changes: queue.SimpleQueue[Change] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._namespaces: set[str] = set()
        self._node_uids: dict[str, str] = {}

    # --- requests ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Any:
        """One request; the JSON answer, or ``ApiError`` with the server's code and reason."""
        try:
            response = self.client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Content-Type": content_type, "Accept": "application/json"},
                body=body,
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=self.timeout,
            )
        except ApiException as exc:
            raise _api_error(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(503, "ServiceUnavailable", f"{self.server}: {exc}") from exc
        return orjson.loads(response.data or b"{}")

    def server_version(self) -> str:
        """``major.minor`` of the API server (e.g. ``1.20``), or ``AttachError``."""
        try:
            info = self.request("GET", "/version")
        except ApiError as exc:
            raise AttachError(f"{self.server}: {exc.code} {exc.message}") from exc
        # major/minor can be empty (distribution builds); gitVersion is always there.
        parts = str(info.get("gitVersion", "")).lstrip("v").split(".")
        if len(parts) < 2 or not parts[0].isdigit():
            raise AttachError(f"{self.server}: cannot read the server's version from {info!r}")
        minor = "".join(ch for ch in parts[1] if ch.isdigit())
        return f"{parts[0]}.{minor}"

    # --- the verbs ---------------------------------------------------------------------------

    def create(self, resource: str, obj: Obj) -> Obj:
        namespace = obj["metadata"].get("namespace", "") if _namespaced(resource) else ""
        if namespace:
            self._ensure_namespace(namespace)
        body = {"apiVersion": RESOURCES[resource][1], "kind": KIND_OF[resource], **obj}
        path = collection_path(resource, namespace=namespace)
        try:
            created = self.request("POST", path, body=body)
        except ApiError as exc:
            if resource != "nodes" or exc.code != 409:
                raise
            # A node left over from an earlier attach: take it over, as a restarted kubelet.
            created = self.request("GET", f"{path}/{obj['metadata']['name']}")
        if resource == "nodes":
            self._node_uids[created["metadata"]["name"]] = created["metadata"]["uid"]
        return created

    def patch(
        self, resource: str, namespace: str, name: str, patch: Obj, subresource: str = ""
    ) -> Obj:
        path = f"{collection_path(resource, namespace=namespace)}/{name}"
        if subresource:
            path += f"/{subresource}"
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def delete(
        self, resource: str, namespace: str, name: str, grace: int | None, uid: str | None
    ) -> Obj | None:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid:
            options["preconditions"] = {"uid": uid}
        path = f"{collection_path(resource, namespace=namespace)}/{name}"
        try:
            return self.request("DELETE", path, body=options)
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise

    def renew_lease(self, node: str, now: float) -> None:
        spec = {
            "holderIdentity": node,
            "leaseDurationSeconds": LEASE_DURATION_S,
            "renewTime": micro(now),
        }
        try:
            self.patch("leases", LEASE_NAMESPACE, node, {"spec": spec})
        except ApiError as exc:
            if exc.code != 404:
                raise
            meta: Obj = {"name": node, "namespace": LEASE_NAMESPACE}
            uid = self._node_uids.get(node)
            if uid:
                meta["ownerReferences"] = [
                    {"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}
                ]
            self.create("leases", {"metadata": meta, "spec": spec})

    def _ensure_namespace(self, namespace: str) -> None:
        if namespace in self._namespaces:
            return
        try:
            self.request("GET", f"/api/v1/namespaces/{namespace}")
        except ApiError as exc:
            if exc.code != 404:
                raise
            body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            try:
                self.request("POST", "/api/v1/namespaces", body=body)
            except ApiError as again:
                if again.code != 409:
                    raise
        self._namespaces.add(namespace)

    # --- watches ------------------------------------------------------------------------------

    def watch_node(self, node: str) -> None:
        for resource, selector in (
            ("nodes", f"metadata.name={node}"),
            ("pods", f"spec.nodeName={node}"),
        ):
            thread = threading.Thread(
                target=self._watch_loop,
                args=(resource, selector),
                daemon=True,
                name=f"attach-{resource}-{node}",
            )
            thread.start()
            self._threads.append(thread)

    def changes(self) -> list[Change]:
        out: list[Change] = []
        while True:
            try:
                out.append(self._changes.get_nowait())
            except queue.Empty:
                return out

    def stop(self) -> None:
        self._stop.set()

    def _watch_loop(self, resource: str, selector: str) -> None:
        """List, then watch from the list's version; on 410 or a dropped stream, again.
        What vanished while not watching is reported DELETED."""
        known: dict[str, Obj] = {}
        version = ""
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._relist(resource, selector, known)
                version = self._watch(resource, selector, version, known)
            except ApiError as exc:
                log.warning("attached: watching %s (%s): %s", resource, selector, exc.message)
                version = ""
                self._stop.wait(RETRY_S)

    def _relist(self, resource: str, selector: str, known: dict[str, Obj]) -> str:
        body = self.request("GET", collection_path(resource), [("fieldSelector", selector)])
        items = {}
        for item in body.get("items") or ():
            item.setdefault("kind", KIND_OF[resource])
            item.setdefault("apiVersion", RESOURCES[resource][1])
            items[item["metadata"]["uid"]] = item
        for uid, gone in list(known.items()):
            if uid not in items:
                self._changes.put((resource, "DELETED", gone))
                del known[uid]
        for uid, item in items.items():
            known[uid] = item
            self._changes.put((resource, "ADDED", item))
        return str((body.get("metadata") or {}).get("resourceVersion") or "")

    def _watch(self, resource: str, selector: str, version: str, known: dict[str, Obj]) -> str:
        """One watch request; the version to go on from ('' to relist)."""
        query = [
            ("watch", "true"),
            ("fieldSelector", selector),
            ("resourceVersion", version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(WATCH_SECONDS)),
        ]
        try:
            response = self.client.call_api(
                collection_path(resource),
                "GET",
                query_params=query,
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=False,
                _request_timeout=(self.timeout, WATCH_SECONDS + 30),
            )
        except ApiException as exc:
            raise _api_error(exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiError(503, "ServiceUnavailable", f"{self.server}: {exc}") from exc
        try:
            for event in _lines(response, self._stop):
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":
                    return ""  # 410 Gone (or another Status): relist
                version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    uid = obj["metadata"]["uid"]
                    if kind == "DELETED":
                        known.pop(uid, None)
                    else:
                        known[uid] = obj
                    self._changes.put((resource, kind, obj))
        except (urllib3.exceptions.HTTPError, OSError, ValueError):
            time.sleep(RETRY_S)
        finally:
            response.release_conn()
        return version


def _lines(response: Any, stop: threading.Event) -> Iterator[Obj]:
    """The JSON lines of a watch response, until it ends or ``stop`` is set."""
    buffer = b""
    for chunk in response.stream(4096, decode_content=False):
        if stop.is_set():
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield orjson.loads(line)


def _namespaced(resource: str) -> bool:
    return resource not in ("nodes",)


def _api_error(exc: ApiException) -> ApiError:
    """The Status the server answered, as the simulator's ``ApiError``."""
    try:
        status = orjson.loads(exc.body or b"{}")
    except orjson.JSONDecodeError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = status.get("reason") or exc.reason or "Unknown"
    message = status.get("message") or f"{exc.status} {exc.reason}"
    return ApiError(int(exc.status or 0), str(reason), str(message))
