"""Checks a cluster's configuration before anything is saved or started: one line per cause.

``clusters add`` and ``demo --kubeconfig`` call these; each raises ``Invalid`` with a
message naming what failed (the file, the context, the API's host and its answer).
Credentials are used for the ``/version`` request and never printed or stored.
"""

from __future__ import annotations

from pathlib import Path

from handoff.live.sources import kubeconfig


class Invalid(ValueError):
    """A configuration that would not work, and why (one line)."""


def kubeconfig_context(path: str, context: str) -> tuple[object, str]:
    """The client configuration of ``context`` (or the current one) in ``path``, and the
    context's name."""
    try:
        return kubeconfig.kubeconfig_context(path, context)
    except kubeconfig.KubeconfigInvalid as exc:
        raise Invalid(str(exc)) from exc


def in_cluster() -> object:
    try:
        return kubeconfig.in_cluster()
    except kubeconfig.KubeconfigInvalid as exc:
        raise Invalid(str(exc)) from exc


def api_version(configuration: object) -> str:
    """GET /version with these credentials within a few seconds: the server's gitVersion."""
    try:
        return kubeconfig.api_version(configuration)
    except kubeconfig.KubeconfigInvalid as exc:
        raise Invalid(str(exc)) from exc


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
