"""What kubectl takes from a kubeconfig: the context in use (``--context`` or the current
one), its namespace, and the files (``--kubeconfig`` or ``$KUBECONFIG``, merged by the
official client as kubectl merges them).

The ``kubernetes`` package takes a second or two to import: it is imported (through
``live.sources.kubeconfig``) only when
there is a kubeconfig to read, so ``--server`` without one starts at once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from handoff.kubectl.errors import PluginError


@dataclass(frozen=True)
class Context:
    name: str
    namespace: str  # the context's namespace, "default" when it names none
    kubeconfig: str  # as given; "" means $KUBECONFIG or ~/.kube/config, as kubectl reads


def resolve(kubeconfig: str | None, context: str | None) -> Context:
    """The context kubectl would use. A missing or broken kubeconfig is a PluginError."""
    from handoff.live.sources.kubeconfig import KubeconfigInvalid
    from handoff.live.sources.kubeconfig import contexts as read_contexts

    try:
        contexts, current = read_contexts(kubeconfig)
    except KubeconfigInvalid as exc:
        raise PluginError(str(exc)) from exc
    if context:
        chosen = next((c for c in contexts if c.get("name") == context), None)
        if chosen is None:
            raise PluginError(f'context "{context}" does not exist in the kubeconfig')
    elif current:
        chosen = current
    else:
        raise PluginError("the kubeconfig has no current context: pass --context")
    namespace = (chosen.get("context") or {}).get("namespace") or "default"
    return Context(chosen["name"], namespace, kubeconfig or "")


def namespace_only(kubeconfig: str | None, context: str | None) -> str:
    """The context's namespace when there is a usable kubeconfig, else "default" (talking
    to a Handoff server needs no kubeconfig)."""
    if not (kubeconfig or context or any(path.is_file() for path in _default_files())):
        return "default"
    try:
        return resolve(kubeconfig, context).namespace
    except PluginError:
        if kubeconfig or context:
            raise
        return "default"


def _default_files() -> list[Path]:
    """The files kubectl reads without --kubeconfig: $KUBECONFIG's, or ~/.kube/config."""
    listed = os.environ.get("KUBECONFIG")
    if listed:
        return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    return [Path("~/.kube/config").expanduser()]
