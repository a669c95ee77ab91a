"""``--local``: watch the kubeconfig context's pods, nodes and events for a few seconds
with Handoff's own watch source (``live.sources.kube``: the official client, as the
workers use it) and fold what was seen with Handoff's fold (``core.timeline``). Nothing
is stored: no Redis, no Handoff server.

A list shows each pod as it is now (its milestones from the object's own timestamps, as
after any relist); the watch that follows adds what happens meanwhile at the time it is
seen. Pods only: nodes and events make the verdicts better (a missing node, a kubelet's
rejection event) but a context that may not read them still gets an answer.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from handoff.core.redact import scrub
from handoff.core.timeline import Timeline
from handoff.core.trace import WatchEvent, format_time
from handoff.kubectl.errors import PluginError
from handoff.kubectl.kubeconfig import Context
from handoff.live.clusters import ClusterConfig
from handoff.live.sources.base import Gone, SourceError, WatchSettings
from handoff.live.sources.kube import KubeSource, api_client
from handoff.live.sources.kubeconfig import ConfigError

RESOURCES = ("pods", "nodes", "events")


@dataclass
class Watched:
    timeline: Timeline
    problems: dict[str, str] = field(default_factory=dict)  # resource -> why it was not read


class _Fold:
    """The timeline, fed from several watch threads."""

    def __init__(self, cluster: str) -> None:
        self.timeline = Timeline(cluster=cluster)
        self.lock = threading.Lock()

    def apply(self, type_: str, objects: list[dict[str, Any]]) -> None:
        now = time.time()
        stamp = format_time(now)
        with self.lock:
            for obj in objects:
                self.timeline.apply(WatchEvent(stamp, type_, scrub(obj), at=now))


def watch(context: Context, seconds: float) -> Watched:
    """Everything the context lets us see in ``seconds``, folded."""
    config = ClusterConfig(context.name, "kubeconfig", context.kubeconfig, context.name)
    try:
        api = api_client(config)
    except (ConfigError, OSError, ValueError, TypeError) as exc:
        raise PluginError(f"kubeconfig: {exc}") from exc
    fold = _Fold(context.name)
    deadline = time.monotonic() + seconds
    settings = WatchSettings(
        server_timeout=max(1, int(seconds) + 1), read_timeout=seconds + 10, connect_timeout=10
    )
    sources = {resource: KubeSource(api) for resource in RESOURCES}
    problems: dict[str, str] = {}
    threads = [
        threading.Thread(
            target=_follow,
            args=(sources[resource], resource, fold, deadline, settings, problems),
            daemon=True,
        )
        for resource in RESOURCES
    ]
    for thread in threads:
        thread.start()
    _wait_until(deadline, threads)
    for source in sources.values():
        source.interrupt()
    for thread in threads:
        thread.join(timeout=10)
    if "pods" in problems:
        raise PluginError(f"cannot watch pods in context {context.name!r}: {problems['pods']}")
    return Watched(fold.timeline, problems)


def _wait_until(deadline: float, threads: list[threading.Thread]) -> None:
    """Until the deadline, or sooner when every watch has given up."""
    while time.monotonic() < deadline and any(t.is_alive() for t in threads):
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def _follow(
    source: KubeSource,
    resource: str,
    fold: _Fold,
    deadline: float,
    settings: WatchSettings,
    problems: dict[str, str],
) -> None:
    """List, then watch from the list's version until the deadline (relisting after a
    410). A failure before the deadline is noted in ``problems``."""
    try:
        version = ""
        while time.monotonic() < deadline:
            if not version:
                items, version = source.list(resource)
                fold.apply("ADDED", items)
            version = _watch_once(source, resource, version, fold, deadline, settings)
    except (SourceError, Gone) as exc:
        if time.monotonic() < deadline:  # not just the interruption at the deadline
            problems[resource] = str(exc)


def _watch_once(
    source: KubeSource,
    resource: str,
    version: str,
    fold: _Fold,
    deadline: float,
    settings: WatchSettings,
) -> str:
    """One watch request; the version to go on from ("" after a 410: relist)."""
    try:
        for event in source.watch(resource, version, settings):
            type_, obj = event.get("type"), event.get("object") or {}
            version = (obj.get("metadata") or {}).get("resourceVersion") or version
            if type_ in ("ADDED", "MODIFIED", "DELETED"):
                fold.apply(type_, [obj])
            if time.monotonic() >= deadline:
                break
    except Gone:
        return ""
    return version
