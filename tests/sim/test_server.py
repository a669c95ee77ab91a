"""The simulated cluster over HTTP, driven by the official Python client and by kubectl."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.scenarios import Options, manual_scheduling
from handoff.sim.serve.server import SimServer
from handoff.sim.serve.tables import pod_status_column

from .helpers import nginx


@pytest.fixture
def served() -> Iterator[SimServer]:
    cluster = manual_scheduling(Options(seed=1))
    server = SimServer(cluster, speed=50.0, bookmark_every=5.0)
    server.start()
    yield server
    server.stop()


def _api(server: SimServer) -> client.CoreV1Api:
    config = client.Configuration(host=server.address)
    return client.CoreV1Api(client.ApiClient(config))


def test_the_python_client_lists_and_watches_with_bookmarks(served: SimServer) -> None:
    api = _api(served)
    time.sleep(0.5)  # 25 virtual seconds: the scenario's first pods exist
    listed = api.list_namespaced_pod("default")
    names = {p.metadata.name for p in listed.items}
    assert {"plain", "pinned"} <= names
    seen: list[str] = []
    bookmarks = 0
    stream = watch.Watch().stream(
        api.list_namespaced_pod,
        "default",
        resource_version=listed.metadata.resource_version,
        allow_watch_bookmarks=True,
        timeout_seconds=2,
    )
    for event in stream:
        if event["type"] == "BOOKMARK":
            bookmarks += 1
        else:
            seen.append(event["object"].metadata.name)
    assert "bigcpu" in seen  # created 30 virtual seconds in, after the list
    assert bookmarks >= 1


def test_the_python_client_gets_410_for_an_expired_version_and_recovers() -> None:
    cluster = Cluster(ClusterConfig(seed=1, history=20))
    cluster.add_node("n1")
    for i in range(40):
        cluster.create_pod(nginx(f"p{i}", node_name="n1"))
    cluster.loop.run(until=120.0)  # all running: the history stops moving
    server = SimServer(cluster, speed=20.0)
    server.start()
    try:
        api = _api(server)
        with pytest.raises(ApiException) as err:
            for _ in watch.Watch().stream(
                api.list_pod_for_all_namespaces, resource_version="2", timeout_seconds=2
            ):
                pass
        assert err.value.status == 410
        listed = api.list_pod_for_all_namespaces()
        events = watch.Watch().stream(
            api.list_pod_for_all_namespaces,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        )
        assert all(e["type"] != "ERROR" for e in events)
    finally:
        server.stop()


def test_it_filters_watches_by_node_name_and_labels(served: SimServer) -> None:
    api = _api(served)
    time.sleep(0.5)
    pods = api.list_pod_for_all_namespaces(field_selector="spec.nodeName=worker-2")
    assert pods.items
    assert all(p.spec.node_name == "worker-2" for p in pods.items)
    dns = api.list_namespaced_pod("kube-system", label_selector="k8s-app=kube-dns")
    assert all(p.metadata.labels["k8s-app"] == "kube-dns" for p in dns.items)


def test_it_streams_initial_events_then_the_end_bookmark(served: SimServer) -> None:
    import urllib.request

    url = (
        f"{served.address}/api/v1/nodes?watch=1&sendInitialEvents=true"
        "&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    )
    with urllib.request.urlopen(url) as response:
        lines = [line for line in response.read().splitlines() if line]
    import orjson

    events = [orjson.loads(line) for line in lines]
    assert [e["type"] for e in events[:3]] == ["ADDED"] * 3
    end = next(e for e in events if e["type"] == "BOOKMARK")
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_it_creates_and_deletes_pods(served: SimServer) -> None:
    api = _api(served)
    body = nginx("made")
    api.create_namespaced_pod("default", body)
    assert api.read_namespaced_pod("made", "default").status.phase == "Pending"
    with pytest.raises(ApiException) as err:
        api.create_namespaced_pod("default", body)
    assert err.value.status == 409
    api.delete_namespaced_pod("made", "default")


def test_the_status_column_matches_kubectl() -> None:
    rejected = {"metadata": {}, "status": {"phase": "Failed", "reason": "OutOfcpu"}}
    assert pod_status_column(rejected) == "OutOfcpu"
    terminating = {"metadata": {"deletionTimestamp": "x"}, "status": {"phase": "Running"}}
    assert pod_status_column(terminating) == "Terminating"


def require_kubectl() -> str:
    """The issue requires kubectl to work against --serve: a missing one fails, never skips."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.fail(
            "kubectl is not installed: install Debian's kubernetes-client "
            "(sudo apt-get install -y kubernetes-client, or `make test` as root)",
            pytrace=False,
        )
    return found


def test_kubectl_applies_a_typod_node_name_and_watches_podgc_delete_it(
    served: SimServer, tmp_path: Path
) -> None:
    kubectl = require_kubectl()
    config = served.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path)}
    manifest = tmp_path / "ghost.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: ghost9\nspec:\n  nodeName: worker-9\n"
        "  containers:\n  - name: nginx\n    image: nginx:1.27.3-alpine\n"
    )
    watcher = subprocess.Popen(
        [kubectl, "get", "pods", "-w"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        applied = subprocess.run(
            [kubectl, "apply", "-f", str(manifest)],
            env=env,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.strip() == "pod/ghost9 created"
        time.sleep(2.5)  # 125 virtual seconds: PodGC has long deleted it
    finally:
        watcher.terminate()
        out, _ = watcher.communicate(timeout=10)
    ghost = [line.split() for line in out.splitlines() if line.startswith("ghost9")]
    assert ghost[0][2] == "Pending"
    assert any(row[2] == "Failed" for row in ghost)
    gone = subprocess.run(
        [kubectl, "get", "pod", "ghost9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert 'pods "ghost9" not found' in gone.stderr
