"""Real clusters (and the simulator's HTTP API) through the official ``kubernetes`` client.

Lists and watches go through ``ApiClient.call_api`` with ``_preload_content=False``: the
body is read as raw JSON lines and parsed with orjson; the client's typed models, slow and
lossy for watch streams, are never built. Credentials stay inside the client's
configuration; nothing here logs or stores them.
"""

from __future__ import annotations

import os
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from handoff.core.resources import EVENTS_GROUP, KIND_OF, collection_path
from handoff.live.clusters import ClusterConfig
from handoff.live.sources.base import Gone, SourceError, WatchSettings


def api_client(config: ClusterConfig) -> k8s.ApiClient:
    """A client for a configured cluster: a kubeconfig file and context, or in-cluster."""
    configuration = k8s.Configuration()
    if config.kind == "in-cluster":
        load_in_cluster(configuration)
    else:
        k8s_config.load_kube_config(
            config_file=config.kubeconfig or None,
            context=config.context or None,
            client_configuration=configuration,
            persist_config=False,
        )
    return client_for(configuration)


def client_for(configuration: k8s.Configuration) -> k8s.ApiClient:
    """An ApiClient whose pool does not retry by itself: urllib3's default ``Retry(3)``
    would sleep through 429s and hide failures; the watch loop retries, with jittered
    back-off and the server's Retry-After, and counts the failures for /healthz."""
    configuration.retries = False
    return k8s.ApiClient(configuration)


# Where a pod's service account is mounted (the official client's defaults); the
# environment can point elsewhere (tests, sidecars mounting it at another path).
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def load_in_cluster(configuration: k8s.Configuration) -> None:
    """This pod's service account: ``KUBERNETES_SERVICE_HOST``/``PORT``, its token (reread
    when it rotates) and CA. ``HANDOFF_SERVICE_ACCOUNT_DIR`` moves the mount."""
    directory = Path(os.environ.get("HANDOFF_SERVICE_ACCOUNT_DIR") or SERVICE_ACCOUNT)
    loader = k8s_config.incluster_config.InClusterConfigLoader(
        token_filename=str(directory / "token"), cert_filename=str(directory / "ca.crt")
    )
    try:
        loader.load_and_set(configuration)
    except k8s_config.ConfigException as exc:
        raise SourceError(f"in-cluster configuration: {exc}") from exc


class KubeSource:
    def __init__(self, api: k8s.ApiClient, events_group: str | None = None) -> None:
        self.api = api
        self.endpoint = endpoint_of(api.configuration.host)
        self._events_group = events_group
        self._response: Any = None
        self._lock = threading.Lock()

    @classmethod
    def for_cluster(cls, config: ClusterConfig) -> KubeSource:
        return cls(api_client(config), config.options.get("events_group"))

    def events_group(self) -> str:
        """events.k8s.io/v1 when the cluster serves it (discovery), else core v1."""
        if self._events_group is None:
            groups = self._get("/apis", {})
            served = {
                version.get("groupVersion")
                for group in groups.get("groups", [])
                for version in group.get("versions", [])
            }
            self._events_group = EVENTS_GROUP if EVENTS_GROUP in served else "v1"
        return self._events_group

    def api_version(self, resource: str) -> tuple[str, str]:
        version = self.events_group() if resource == "events" else "v1"
        return version, KIND_OF[resource]

    def _path(self, resource: str) -> str:
        version, _ = self.api_version(resource)
        return collection_path(resource, version)

    def list(self, resource: str) -> tuple[list[dict[str, Any]], str]:
        version, kind = self.api_version(resource)
        body = self._get(self._path(resource), {})
        items = body.get("items") or []
        for item in items:  # list items come without kind/apiVersion
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", version)
        return items, (body.get("metadata") or {}).get("resourceVersion", "")

    def watch(
        self, resource: str, resource_version: str, settings: WatchSettings
    ) -> Iterator[dict[str, Any]]:
        """Sends the watch request at once (an error status raises here, before any event:
        the caller knows the API server answered when this returns), then yields events."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(settings.server_timeout),
        }
        response = self._call(
            self._path(resource), query, (settings.connect_timeout, settings.read_timeout)
        )
        with self._lock:
            self._response = response
        return self._events(response)

    def _events(self, response: Any) -> Iterator[dict[str, Any]]:
        try:
            for line in _lines(response):
                event = orjson.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    if status.get("code") == 410:
                        raise Gone(status.get("message", "too old resource version"))
                yield event
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # A read timeout (silent connection), a reset: the caller re-watches.
            raise SourceError(f"watch interrupted: {type(exc).__name__}") from exc
        finally:
            with self._lock:
                self._response = None
            response.release_conn()

    def interrupt(self) -> None:
        with self._lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except Exception:
                response.close()

    def _get(self, path: str, query: dict[str, str]) -> dict[str, Any]:
        response = self._call(path, query, (10.0, 60.0))
        try:
            return orjson.loads(response.data)
        finally:
            response.release_conn()

    def _call(self, path: str, query: dict[str, str], timeout: tuple[float, float]) -> Any:
        try:
            return self.api.call_api(
                path,
                "GET",
                query_params=list(query.items()),
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
                _return_http_data_only=True,
            )
        except ApiException as exc:
            if exc.status == 410:
                raise Gone(exc.reason or "Gone") from exc
            if not exc.status:  # the client's word for a TLS failure (status 0)
                raise SourceError(_tls_failure(exc.reason)) from exc
            retry = (exc.headers or {}).get("Retry-After")
            raise SourceError(
                f"HTTP {exc.status} {exc.reason}", exc.status, _seconds(retry)
            ) from exc
        except AttributeError as exc:
            # kubernetes 36: the TLS failure's ApiException has no body, and the client's
            # own handler fails decoding it. What failed is the exception it was handling.
            handled = exc.__context__
            if isinstance(handled, ApiException) and not handled.status:
                raise SourceError(_tls_failure(handled.reason)) from handled
            raise
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise SourceError(f"API unreachable: {cause(exc)}") from exc


def endpoint_of(url: str) -> str:
    """``host:port`` of the API server's URL (the scheme's port when none is given)."""
    parsed = urllib.parse.urlsplit(url or "")
    try:
        port = parsed.port
    except ValueError:
        port = None
    port = port or (443 if parsed.scheme == "https" else 80)
    host = parsed.hostname or "?"
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def cause(exc: BaseException) -> str:
    """Why a connection failed, in words and without the address (the caller names the
    endpoint): ``connection refused (NewConnectionError)``, ``timed out (ConnectTimeoutError)``."""
    seen: BaseException | None = exc
    for _ in range(5):  # the OS error urllib3 wrapped, if any
        if seen is None or (isinstance(seen, OSError) and seen.strerror):
            break
        seen = getattr(seen, "reason", None) or seen.__cause__ or seen.__context__
    name = type(exc).__name__
    if isinstance(seen, OSError) and seen.strerror:
        return f"{seen.strerror[0].lower()}{seen.strerror[1:]} ({name})"
    if "timed out" in str(exc).lower():
        return f"timed out ({name})"
    return name


def _tls_failure(reason: str | None) -> str:
    """One line for a failed TLS handshake (the client's reason is "SSLError" and urllib3's
    message, which names the host): the class, and whether the certificate was refused."""
    text = reason or ""
    kind = text.split("\n", 1)[0].strip() or "SSLError"
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return f"API unreachable: {kind} (certificate verify failed: check the CA)"
    return f"API unreachable: {kind}"


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _lines(response: Any) -> Iterator[bytes]:
    """Newline-separated JSON from a chunked body, as bytes (no str round trip)."""
    pending = b""
    for chunk in response.stream(amt=None, decode_content=False):
        pending += chunk
        if b"\n" not in pending:
            continue
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending
