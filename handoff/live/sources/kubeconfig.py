"""A kubeconfig or in-cluster account checked before anything is saved or started: the
context exists, and the API answers ``/version`` within a few seconds with its credentials.
Each failure is one line (``KubeconfigInvalid``) naming the file, the context, or the API's
host and its answer; credentials are used for the request and never printed or stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from handoff.live.sources.base import SourceError
from handoff.live.sources.kube import client_for, load_in_cluster

VERSION_TIMEOUT = (3.0, 5.0)  # connect, read: "within a few seconds"
ConfigError = k8s_config.ConfigException  # what a kubeconfig the client cannot use raises


class KubeconfigInvalid(SourceError):
    """A kubeconfig or account that would not work, and why (one line)."""


def contexts(path: str | None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The contexts of a kubeconfig (``None``: $KUBECONFIG or ~/.kube/config, merged as
    kubectl merges them) and the current one."""
    try:
        return k8s_config.list_kube_config_contexts(config_file=path or None)
    except (ConfigError, yaml.YAMLError, OSError, ValueError, TypeError, KeyError) as exc:
        raise KubeconfigInvalid(f"kubeconfig: {_first_line(exc)}") from exc


def kubeconfig_context(path: str, context: str) -> tuple[k8s.Configuration, str]:
    """The client configuration of ``context`` (or the current one) in ``path``, and the
    context's name; Invalid when the file is missing, does not parse or lacks it."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise KubeconfigInvalid(f"kubeconfig {file} does not exist")
    try:
        contexts, current = k8s_config.list_kube_config_contexts(config_file=str(file))
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, TypeError, KeyError) as exc:
        raise KubeconfigInvalid(f"kubeconfig {file} does not parse: {_first_line(exc)}") from exc
    names = [c.get("name") for c in contexts or ()]
    if context and context not in names:
        have = ", ".join(str(n) for n in names) or "none"
        raise KubeconfigInvalid(f"kubeconfig {file} has no context {context!r} (it has: {have})")
    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=str(file),
            context=context or None,
            client_configuration=configuration,
            persist_config=False,
        )
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, TypeError, KeyError) as exc:
        raise KubeconfigInvalid(f"kubeconfig {file}: {_first_line(exc)}") from exc
    return configuration, context or (current or {}).get("name", "")


def in_cluster() -> k8s.Configuration:
    configuration = k8s.Configuration()
    try:
        load_in_cluster(configuration)
    except SourceError as exc:
        raise KubeconfigInvalid(f"not running in a cluster: {exc}") from exc
    return configuration


def api_version(configuration: k8s.Configuration) -> str:
    """GET /version with these credentials within a few seconds: the server's gitVersion."""
    host = configuration.host
    api = client_for(configuration)
    try:
        data = api.call_api(
            "/version",
            "GET",
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=VERSION_TIMEOUT,
            _return_http_data_only=True,
        ).data
    except ApiException as exc:
        status = f"HTTP {exc.status} {exc.reason}"
        raise KubeconfigInvalid(f"the API at {host} answered /version with {status}") from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeconfigInvalid(f"the API at {host} does not answer: {_cause(exc)}") from exc
    finally:
        api.close()
    try:
        version: Any = orjson.loads(data)
        return str(version["gitVersion"])
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        what = f"{host} answered /version with something else than Kubernetes"
        raise KubeconfigInvalid(what) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _cause(exc: BaseException) -> str:
    """The innermost reason of a connection failure (refused, timed out, name unknown)."""
    reason = getattr(exc, "reason", None) or exc
    text = str(reason)
    if ">: " in text:  # urllib3 puts the connection object first
        text = text.split(">: ", 1)[1]
    return text or type(reason).__name__
