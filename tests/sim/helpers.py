"""Small clusters and a capturing recorder for the simulator's behaviour tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.objects import Obj, container, pod, pod_spec
from handoff.sim.recording import Recording

BASE_DIR = Path(__file__).resolve().parents[2]


class Capture:
    """Everything the recording watcher saw, in observed order."""

    def __init__(self, cluster: Cluster, settle: float = 1.0) -> None:
        self.lines: list[tuple[float, str, Obj]] = []
        self.recording = Recording(
            cluster.api,
            lambda t, type_, obj: self.lines.append((t, type_, obj)),
            bookmark_every=None,
        )
        self.recording.start()
        self.cluster = cluster
        # Let informers see the nodes first, as on any cluster that has been up a while.
        self.run(settle)

    def run(self, seconds: float) -> None:
        self.cluster.loop.run(until=self.cluster.loop.elapsed + seconds)
        self.recording.drain()

    def pods(self, name: str) -> list[tuple[float, str, Obj]]:
        return [
            (t, ty, o)
            for t, ty, o in self.lines
            if o.get("kind") == "Pod" and o["metadata"].get("name") == name
        ]

    def events(self, name: str | None = None, reason: str | None = None) -> list[Obj]:
        out = []
        for _, ty, o in self.lines:
            if o.get("kind") != "Event" or ty == "BOOKMARK":
                continue
            ref = o.get("involvedObject") or o.get("regarding") or {}
            if name is not None and ref.get("name") != name:
                continue
            if reason is not None and o.get("reason") != reason:
                continue
            out.append(o)
        return out

    def last(self, name: str) -> Obj:
        return self.pods(name)[-1][2]


def small_cluster(seed: int = 1, **config: Any) -> Cluster:
    cluster = Cluster(ClusterConfig(seed=seed, **config))
    return cluster


def nginx(
    name: str,
    *,
    node_name: str | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    image: str = "nginx:1.27.3-alpine",
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    body = pod_spec([container("nginx", image, cpu, memory)], node_name=node_name, **spec)
    return pod(name, "default", body, annotations=annotations)


def condition(obj: Obj, type_: str) -> Obj | None:
    for cond in obj["status"].get("conditions") or ():
        if cond["type"] == type_:
            return cond
    return None


@contextmanager
def served_from_the_command_line(
    tmp_path: Path, *options: str, scenario: str = "manual-scheduling"
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``manage.py simulate --scenario SCENARIO --serve`` on a free port, with ``options``:
    the process and the address it printed, and the rest of its output unread. Terminated
    at the end of the block."""
    argv = [sys.executable, "manage.py", "simulate", "--scenario", scenario]
    argv += ["--serve", "127.0.0.1:0", "--kubeconfig", str(tmp_path / "kubeconfig"), *options]
    proc = subprocess.Popen(
        argv, cwd=BASE_DIR, stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith(f"serving {scenario} at http://127.0.0.1:"), first
        yield proc, first.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def control(address: str, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    """A request to one of the served simulator's control endpoints (``/_sim/...``):
    (HTTP status, decoded JSON answer). ``body`` is sent as JSON unless already bytes."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{address}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())
