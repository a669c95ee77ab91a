"""Build an attachable scenario on a real API server and run it in a thread."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence

from handoff.attach.kube import AttachError, KubeRemote
from handoff.sim.attached.driver import Inbox, NodeFault, drive
from handoff.sim.attached.mirror import MirrorAPI
from handoff.sim.cluster import Cluster
from handoff.sim.components.apiserver import ApiError
from handoff.sim.scenarios.base import Options, Scenario


class Attached:
    """A scenario's nodes and kubelets running against a real API server."""

    def __init__(self, cluster: Cluster, remote: KubeRemote, duration: float | None) -> None:
        self.cluster = cluster
        self.remote = remote
        self.duration = duration
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="attached-sim")
        self.error: BaseException | None = None
        self.inbox: Inbox = queue.SimpleQueue()

    @property
    def api(self) -> MirrorAPI:
        return self.cluster.api  # type: ignore[return-value]

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        try:
            drive(self.cluster.loop, self.api, self.stopping, self.duration, self.inbox)
        except BaseException as exc:  # reported by wait(); the thread must not die silently
            self.error = exc
            raise
        finally:
            self.stopping.set()

    def call(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` in the simulation's thread at its next step (e.g.
        ``cluster.fault``): the cluster is not safe to touch from another thread."""
        self.inbox.put((fn, args))

    def wait(self, timeout: float | None = None) -> bool:
        """True once the run has ended (its duration, ``stop`` or an error)."""
        return self.stopping.wait(timeout)

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout=10)
        self.remote.stop()


def attach(
    scenario: Scenario,
    options: Options,
    kubeconfig: str,
    *,
    context: str | None = None,
    k8s_version: str | None = None,
    faults: Sequence[NodeFault] = (),
) -> Attached:
    """Register the scenario's nodes on the API server of ``kubeconfig`` and start their
    kubelets; ``AttachError`` (one line) when the scenario or the server cannot be used."""
    if not scenario.attachable:
        raise AttachError(
            f"scenario {scenario.name!r} cannot run attached: it stages its situations inside "
            "the simulator's own control plane (attachable: manual-scheduling, steady, fidelity)"
        )
    remote = KubeRemote(kubeconfig, context)
    options.start = float(int(time.time()))
    options.remote = remote
    options.k8s_version = k8s_version or remote.server_version()
    try:
        cluster = scenario.build(options)
    except ApiError as exc:
        remote.stop()
        raise AttachError(f"{remote.server}: registering the nodes failed: {exc.message}") from exc
    for fault in faults:
        if fault.node not in cluster.kubelets:
            remote.stop()
            raise AttachError(f"no node {fault.node!r} in scenario {scenario.name!r}")
        if fault.mode == "delete":
            cluster.at(fault.at, cluster.delete_node, fault.node)
        else:
            cluster.at(fault.at, cluster.fault, fault.node, fault.mode)
    return Attached(cluster, remote, options.duration)
