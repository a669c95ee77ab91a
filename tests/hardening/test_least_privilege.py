"""Handoff asks a cluster for nothing deploy/rbac.yaml does not grant.

Two checks: every request the real watch code makes (through the `kubernetes` client, to
the served simulator, behind a recording proxy) maps to a verb and resource the role
grants; and no code outside the simulator names a write verb of the client.
"""

from __future__ import annotations

import ast
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from handoff.live import clusters, leases, store
from handoff.live.sources.base import WatchSettings
from handoff.live.sources.kube import KubeSource
from handoff.live.sources.sink import StreamSink
from handoff.live.sources.watching import WatchLoop
from handoff.sim.scenarios import SCENARIOS, Options
from handoff.sim.serve.server import SimServer
from tests.hardening.recording_proxy import RecordingProxy

ROOT = Path(__file__).resolve().parents[2]
# Discovery and version: readable by every authenticated user (system:discovery).
DISCOVERY = ("/api", "/apis", "/version", "/openapi")
WRITE_METHODS = ("create_", "delete_", "patch_", "replace_", "connect_")


def granted() -> set[tuple[str, str, str]]:
    docs = list(yaml.safe_load_all((ROOT / "deploy/rbac.yaml").read_text()))
    roles = [d for d in docs if d["kind"] == "ClusterRole"]
    assert len(roles) == 1, "one ClusterRole, bound to Handoff's service account"
    return {
        (group, resource, verb)
        for rule in roles[0]["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def needed(method: str, url: str) -> tuple[str, str, str] | None:
    """The (group, resource, verb) a request needs; None for discovery."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    segments = path.strip("/").split("/")
    if segments[0] == "api" and len(segments) >= 3:
        group, rest = "", segments[2:]
    elif segments[0] == "apis" and len(segments) >= 4:
        group, rest = segments[1], segments[3:]
    else:
        assert path in DISCOVERY or path.startswith(DISCOVERY), f"unexpected request {url}"
        return None
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource, named = rest[0], len(rest) > 1
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    query = parse_qs(parts.query)
    watching = query.get("watch", ["false"])[-1] in ("true", "1")
    verb = {
        "GET": "watch" if watching else ("get" if named else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }[method]
    return group, resource, verb


def test_the_role_is_read_only_on_pods_nodes_and_events() -> None:
    assert granted() == {
        (group, resource, verb)
        for group, resource in (
            ("", "pods"),
            ("", "nodes"),
            ("", "events"),
            ("events.k8s.io", "events"),
        )
        for verb in ("get", "list", "watch")
    }
    deployment = next(
        d
        for d in yaml.safe_load_all((ROOT / "deploy/handoff.yaml").read_text())
        if d["kind"] == "Deployment"
    )
    account = next(
        d
        for d in yaml.safe_load_all((ROOT / "deploy/rbac.yaml").read_text())
        if d["kind"] == "ServiceAccount"
    )
    assert (
        deployment["spec"]["template"]["spec"]["serviceAccountName"] == account["metadata"]["name"]
    )


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[RecordingProxy, Path]]:
    cluster = SCENARIOS["manual-scheduling"].build(Options(seed=3))
    server = SimServer(cluster, speed=30.0, bookmark_every=1.0)
    server.start()
    proxy = RecordingProxy(server.address)
    proxy.start()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    kubeconfig.write_text(kubeconfig.read_text().replace(server.address, proxy.address))
    try:
        yield proxy, kubeconfig
    finally:
        proxy.stop()
        server.stop()


@pytest.mark.parametrize("events_group", ["events.k8s.io/v1", "v1"])
def test_every_request_of_the_watch_code_is_granted(
    proxied: tuple[RecordingProxy, Path], redis_client, events_group: str
) -> None:
    proxy, kubeconfig = proxied
    name = f"rbac-{events_group.replace('/', '-').replace('.', '-')}"
    config = clusters.ClusterConfig(
        name=name, kind="kubeconfig", kubeconfig=str(kubeconfig), options={}
    )
    settings = WatchSettings(server_timeout=1, read_timeout=5, lease_ttl=3)

    def exercise(resource: str) -> None:
        source = KubeSource.for_cluster(config)
        if events_group == "v1":
            source = KubeSource(source.api, "v1")
        sink = StreamSink(redis_client, name, resource)
        lease = leases.Lease(redis_client, store.lease_key(name, resource), "test", 3)
        assert lease.acquire()
        # A list, watches, then a forced relist (the 410 path) and another watch.
        WatchLoop(source, sink, resource, settings, lease).run(time.monotonic() + 2.5)
        redis_client.hdel(store.stream_key(name, resource), "rv")
        WatchLoop(source, sink, resource, settings, lease).run(time.monotonic() + 1.5)
        lease.release()

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(exercise, ("pods", "nodes", "events")))

    rules = granted()
    seen = {needed(method, url) for method, url in proxy.requests} - {None}
    assert seen <= rules, f"requests beyond the role: {sorted(seen - rules)}"
    events = ("events.k8s.io" if events_group != "v1" else "", "events")
    for group, resource in (("", "pods"), ("", "nodes"), events):
        assert {(group, resource, "list"), (group, resource, "watch")} <= seen


def test_no_code_outside_the_simulator_calls_a_write_verb() -> None:
    offenders = []
    for path in sorted((ROOT / "handoff").rglob("*.py")) + sorted((ROOT / "webui").rglob("*.py")):
        # The simulator writes, and so does its transport to a real API server when
        # attached (``simulate --attach``), which the reading side cannot import
        # (.importlinter: the live pipeline and the web do not import handoff.attach).
        if path.relative_to(ROOT).parts[1:2] in (("sim",), ("attach",)):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                continue
            name = node.func.attr
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            if name == "call_api":
                method = node.args[1] if len(node.args) > 1 else None
                if not (isinstance(method, ast.Constant) and method.value == "GET"):
                    offenders.append(f"{where}: call_api with a method other than GET")
            elif name.startswith(WRITE_METHODS) and name.endswith(
                ("_pod", "_node", "_event", "_namespaced_pod", "_namespaced_event", "_binding")
            ):
                offenders.append(f"{where}: {name}")
    assert not offenders, offenders
