"""The simulated cluster over HTTP: enough of the Kubernetes API for clients and kubectl.

Discovery (/version, /api, /apis), list and watch of pods, nodes and events (core/v1 and
events.k8s.io/v1), get/create/delete of pods. ``SimServer`` is the ``ClusterAPI`` (the verbs
and the clock, ``serve.api``) with what running it takes: the simulation thread that paces
virtual time, the HTTP server on its port (``serve.http``) and a kubeconfig for clients.
"""

from __future__ import annotations

import threading
from pathlib import Path

from handoff.sim.cluster import Cluster
from handoff.sim.serve.api import ClusterAPI
from handoff.sim.serve.http import APIHTTPServer


class SimServer(ClusterAPI):
    """Owns the simulation thread and the HTTP server."""

    def __init__(
        self,
        cluster: Cluster,
        host: str = "127.0.0.1",
        port: int = 0,
        speed: float = 1.0,
        bookmark_every: float = 60.0,
        duration: float | None = None,
        paused: bool = False,
    ) -> None:
        super().__init__(cluster, speed, bookmark_every, duration, paused)
        self.httpd = APIHTTPServer((host, port), self)
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> None:
        for target in (self._simulate, self.httpd.serve_forever):
            thread = threading.Thread(target=target, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        with self.lock:
            for watcher in self.watchers:
                watcher.events.put(None)

    def _simulate(self) -> None:
        """Advance virtual time in step with the wall clock until stopped."""
        with self.lock:
            self._anchor()
        while not self.stopping.is_set():
            self.advance()
            self.stopping.wait(0.01)

    def write_kubeconfig(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        name = self.cluster.config.name
        path.write_text(
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: {name}\n  cluster:\n    server: {self.address}\n"
            f"users:\n- name: {name}\n  user:\n    token: handoff-sim\n"
            f"contexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n"
            "    namespace: default\n"
            f"current-context: {name}\n"
        )
        return path
