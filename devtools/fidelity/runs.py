"""The two runs ``manage.py fidelity`` compares, each recorded as a trace v1 file: the
scenario on the built-in simulator (flat out, shaped as ``--k8s-version``), and the same
scenario attached to a real control plane (``simulate --attach``: its nodes and kubelets,
the real scheduler and controllers), watched with Handoff's own API client as it runs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handoff.attach.kube import AttachError, KubeRemote
from handoff.attach.run import Attached, attach
from handoff.core.trace import TraceWriter, format_time, parse_time
from handoff.live.clusters import ClusterConfig
from handoff.live.sources.base import Gone, SourceError, WatchSettings
from handoff.live.sources.kube import KubeSource, api_client
from handoff.sim import Options, run
from handoff.sim.components.apiserver import ApiError
from handoff.sim.objects import NOT_READY_TAINT
from handoff.sim.scenarios.base import Scenario

WATCHED = ("pods", "nodes", "events")
WATCH = WatchSettings(server_timeout=30, read_timeout=60.0)
# After the scenario's last second: the last watch updates still on their way.
SETTLE_S = 2.0


@dataclass(frozen=True)
class Recorded:
    """A run's trace and its virtual time zero (epoch seconds): times in the comparison
    are seconds since it. ``end`` is where the run stopped, on the same clock."""

    trace: Path
    start: float
    end: float
    server: str = "simulator"
    version: str = ""


def on_simulator(scenario: Scenario, duration: float, version: str, out: Path) -> Recorded:
    """The scenario on the built-in simulator, shaped as Kubernetes ``version``."""
    options = Options(duration=duration, k8s_version=version)
    cluster, _ = run(scenario, options, record=out, speed=None, events_group="v1")
    return Recorded(out, cluster.loop.start, cluster.loop.start + duration)


def attached(
    scenario: Scenario, duration: float, kubeconfig: str, out: Path, context: str | None = None
) -> Recorded:
    """The scenario's nodes and kubelets on the API server of ``kubeconfig`` for
    ``duration`` wall seconds, its pods, nodes and core/v1 events recorded meanwhile; what
    it created is deleted afterwards. ``AttachError`` (one line) when it cannot be used."""
    _wait_for_default_account(kubeconfig, context)
    running = attach(scenario, Options(duration=duration), kubeconfig, context=context)
    start = running.cluster.loop.start
    version = running.cluster.config.kubelet_version.lstrip("v").rpartition(".")[0]
    recorder = Recorder(kubeconfig, context)
    try:
        wait_for_untainted_nodes(running.remote, list(running.cluster.kubelets))
        recorder.start()
    except AttachError:
        _clean_up(running, start)
        running.stop()
        raise
    running.start()
    try:
        running.wait(duration + 60)
        time.sleep(SETTLE_S)
    finally:
        recorder.stop()
        _clean_up(running, start)
        running.stop()
    if running.error is not None:
        raise AttachError(f"the attached run failed: {running.error}")
    recorder.write(out, scenario.name)
    return Recorded(out, start, start + duration, running.remote.server, version)


def _wait_for_default_account(kubeconfig: str, context: str | None, timeout: float = 60) -> None:
    """A control plane just started has no ``default`` service account for a while (the
    service account controller makes it), and pods cannot be created until it has."""
    remote = KubeRemote(kubeconfig, context)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                remote.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")
                return
            except ApiError as exc:
                if exc.code != 404 or time.monotonic() > deadline:
                    why = exc.message.rpartition("Caused by ")[2] or exc.message
                    raise AttachError(f"{remote.server}: {exc.code} {why}") from exc
            time.sleep(0.5)
    finally:
        remote.stop()


def wait_for_untainted_nodes(remote: KubeRemote, names: list[str], timeout: float = 30) -> None:
    """Until the real node lifecycle controller has taken the ``not-ready:NoSchedule`` taint
    off the nodes ``names``. The TaintNodesByCondition admission plugin (on by default since
    1.17, seen on v1.20.2) puts it on every Node created through the API; the simulator's
    registered nodes never carry it (docs/simulator.md). On a control plane just started,
    the controller may not run yet when the nodes register: recording before it had
    removed the taint made the comparison depend on which came first."""
    deadline = time.monotonic() + timeout
    tainted = names
    while tainted:
        tainted = [name for name in tainted if _has_admission_taint(remote, name)]
        if tainted and time.monotonic() > deadline:
            raise AttachError(
                f"{remote.server}: node(s) {', '.join(tainted)} still carry {NOT_READY_TAINT}"
                f":NoSchedule after {timeout:g} s (is the node lifecycle controller running?)"
            )
        if tainted:
            time.sleep(0.1)


def _has_admission_taint(remote: KubeRemote, name: str) -> bool:
    try:
        node = remote.request("GET", f"/api/v1/nodes/{name}")
    except ApiError as exc:
        why = f"{exc.code} {exc.message}"
        raise AttachError(f"{remote.server}: reading node {name}: {why}") from exc
    taints = (node.get("spec") or {}).get("taints") or ()
    return any(t["key"] == NOT_READY_TAINT and t["effect"] == "NoSchedule" for t in taints)


class Recorder:
    """Lists then watches pods, nodes and core/v1 events (one thread each, relisting on
    410), keeping every change with the time it arrived."""

    def __init__(self, kubeconfig: str, context: str | None) -> None:
        config = ClusterConfig("fidelity", "kubeconfig", kubeconfig=kubeconfig, context=context)
        self.sources = {r: KubeSource(api_client(config), events_group="v1") for r in WATCHED}
        self.error = ""
        self.seen: list[tuple[float, str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = [
            threading.Thread(target=self._follow, args=(r,), daemon=True, name=f"record-{r}")
            for r in WATCHED
        ]
        self.listed = threading.Barrier(len(WATCHED) + 1)

    def start(self) -> None:
        """Start the watches; returns once each has listed (the run starts after)."""
        for thread in self.threads:
            thread.start()
        try:
            self.listed.wait(timeout=30)
        except threading.BrokenBarrierError:
            self.stop()
            why = self.error or "no answer within 30 s"
            raise AttachError(f"recording the real control plane failed: {why}") from None

    def _follow(self, resource: str) -> None:
        source = self.sources[resource]
        try:
            version = self._list(source, resource)
            self.listed.wait(timeout=30)
        except (SourceError, threading.BrokenBarrierError) as exc:
            self.error = self.error or f"listing {resource}: {exc}"
            self.listed.abort()
            return
        while not self.stopping.is_set():
            try:
                for event in source.watch(resource, version, WATCH):
                    obj = event.get("object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event.get("type") != "BOOKMARK":
                        self._keep(event["type"], obj)
            except Gone:
                version = self._list(source, resource)
            except SourceError:
                self.stopping.wait(1.0)

    def _list(self, source: KubeSource, resource: str) -> str:
        items, version = source.list(resource)
        for item in items:
            self._keep("ADDED", item)
        return version

    def _keep(self, type_: str, obj: dict[str, Any]) -> None:
        with self.lock:
            self.seen.append((time.time(), type_, obj))

    def stop(self) -> None:
        self.stopping.set()
        for source in self.sources.values():
            source.interrupt()
        for thread in self.threads:
            thread.join(timeout=5)

    def write(self, out: Path, scenario: str) -> None:
        with self.lock, TraceWriter(out, cluster="real", source=f"attached:{scenario}") as w:
            for seen, type_, obj in self.seen:
                w.write(format_time(seen), type_, obj)


def _clean_up(running: Attached, start: float) -> None:
    """Delete what the run made (created at or after its start): Deployments, pods at
    grace 0 (a stopped node's pods would stay Terminating), the scenario's nodes."""
    remote = running.remote
    for path in ("/apis/apps/v1/deployments", "/api/v1/pods"):
        for item in remote.request("GET", path).get("items") or []:
            meta = item["metadata"]
            if _created(meta) < start - 1:
                continue
            kind = "deployments" if "deployments" in path else "pods"
            base = "/apis/apps/v1" if kind == "deployments" else "/api/v1"
            _quietly(
                remote.request,
                "DELETE",
                f"{base}/namespaces/{meta['namespace']}/{kind}/{meta['name']}",
                [("gracePeriodSeconds", "0"), ("propagationPolicy", "Background")],
            )
    for name in running.cluster.kubelets:
        _quietly(remote.request, "DELETE", f"/api/v1/nodes/{name}")


def _created(meta: dict[str, Any]) -> float:
    stamp = meta.get("creationTimestamp")
    return parse_time(stamp) if stamp else 0.0


def _quietly(call: Any, *args: Any) -> None:
    try:
        call(*args)
    except ApiError:  # already gone (a controller's cleanup, PodGC): nothing to do
        return
