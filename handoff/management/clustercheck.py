"""Checks a cluster's configuration before anything is saved or started: one line per cause.

``clusters add`` and ``demo --kubeconfig`` call these; each raises ``Invalid`` with a
message naming what failed (the file, the context, the API's host and its answer).
Credentials are used for the ``/version`` request and never printed or stored.
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


class Invalid(ValueError):
    """A configuration that would not work, and why (one line)."""


def kubeconfig_context(path: str, context: str) -> tuple[k8s.Configuration, str]:
    """The client configuration of ``context`` (or the current one) in ``path``, and the
    context's name; Invalid when the file is missing, does not parse or lacks it."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise Invalid(f"kubeconfig {file} does not exist")
    try:
        contexts, current = k8s_config.list_kube_config_contexts(config_file=str(file))
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, TypeError, KeyError) as exc:
        raise Invalid(f"kubeconfig {file} does not parse: {_first_line(exc)}") from exc
    names = [c.get("name") for c in contexts or ()]
    if context and context not in names:
        have = ", ".join(str(n) for n in names) or "none"
        raise Invalid(f"kubeconfig {file} has no context {context!r} (it has: {have})")
    configuration = k8s.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=str(file),
            context=context or None,
            client_configuration=configuration,
            persist_config=False,
        )
    except (k8s_config.ConfigException, yaml.YAMLError, OSError, TypeError, KeyError) as exc:
        raise Invalid(f"kubeconfig {file}: {_first_line(exc)}") from exc
    return configuration, context or (current or {}).get("name", "")


def in_cluster() -> k8s.Configuration:
    configuration = k8s.Configuration()
    try:
        load_in_cluster(configuration)
    except SourceError as exc:
        raise Invalid(f"not running in a cluster: {exc}") from exc
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
        raise Invalid(f"the API at {host} answered /version with {status}") from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Invalid(f"the API at {host} does not answer: {_cause(exc)}") from exc
    finally:
        api.close()
    try:
        version: Any = orjson.loads(data)
        return str(version["gitVersion"])
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise Invalid(f"{host} answered /version with something else than Kubernetes") from exc


def trace_file(path: str) -> str:
    """Invalid unless ``path`` holds watch events Handoff can replay; returns its format."""
    from handoff.interop.importers import open_events

    file = Path(path).expanduser()
    if not file.is_file():
        raise Invalid(f"trace {file} does not exist")
    reader = open_events(file, kinds=None)
    try:
        first = next(iter(reader), None)
    except (OSError, EOFError, ValueError) as exc:
        raise Invalid(f"trace {file} does not read: {_first_line(exc)}") from exc
    if first is None:
        why = f": line {reader.errors[0].line}: {reader.errors[0].message}" if reader.errors else ""
        raise Invalid(f"{file} holds no watch events{why}")
    return reader.format or "trace"


def scenario(name: str) -> None:
    from handoff.sim import SCENARIOS

    if name not in SCENARIOS:
        raise Invalid(f"no simulator scenario {name!r} (known: {', '.join(sorted(SCENARIOS))})")


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
