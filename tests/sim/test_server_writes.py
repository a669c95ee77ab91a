"""Writes over the simulator's HTTP API: PATCH and PUT, with the client and kubectl."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.scenarios import Options
from handoff.sim.scenarios.steady import steady
from handoff.sim.serve.patches import json_patch, merge_patch, strategic_merge_patch
from handoff.sim.serve.server import SimServer

from .helpers import nginx
from .test_server import require_kubectl


@pytest.fixture
def served() -> Iterator[SimServer]:
    cluster = Cluster(ClusterConfig(seed=5))
    cluster.add_node("n1")
    cluster.create_pod(nginx("web", node_name="n1"))
    cluster.loop.run(until=30.0)
    server = SimServer(cluster, speed=10.0)
    server.start()
    yield server
    server.stop()


def _api(server: SimServer) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(client.Configuration(host=server.address)))


def _kubectl(server: SimServer, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    config = server.write_kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp_path)}
    return subprocess.run(
        [require_kubectl(), *args], env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_strategic_merge_patches_lists_by_their_merge_key() -> None:
    pod = {"spec": {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y"}]}}
    patched = strategic_merge_patch(
        pod,
        {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "spec": {"containers": [{"name": "b", "image": "y:2"}]},
        },
    )
    assert patched["spec"]["containers"] == [
        {"name": "a", "image": "x:1"},
        {"name": "b", "image": "y:2"},
    ]
    assert merge_patch(pod, {"spec": {"containers": [{"name": "c"}]}}) == {
        "spec": {"containers": [{"name": "c"}]}
    }
    deleted = strategic_merge_patch(
        pod, {"spec": {"containers": [{"name": "a", "$patch": "delete"}]}}
    )
    assert [c["name"] for c in deleted["spec"]["containers"]] == ["b"]
    assert json_patch({"a": [1]}, [{"op": "add", "path": "/a/-", "value": 2}]) == {"a": [1, 2]}


def test_the_client_patches_labels_and_annotations_with_each_patch_type(
    served: SimServer,
) -> None:
    api = _api(served)
    before = api.read_namespaced_pod("web", "default")
    api.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"tier": "front"}}})
    merged = api.patch_namespaced_pod(
        "web",
        "default",
        {"metadata": {"annotations": {"team": "sre"}}},
        _content_type="application/merge-patch+json",
    )
    assert merged.metadata.labels["tier"] == "front"
    assert merged.metadata.annotations["team"] == "sre"
    assert int(merged.metadata.resource_version) > int(before.metadata.resource_version)
    patched = api.patch_namespaced_pod(
        "web", "default", [{"op": "remove", "path": "/metadata/labels/tier"}]
    )
    assert "tier" not in (patched.metadata.labels or {})
    assert patched.status.phase == "Running"  # status is not the main resource's to change


def test_a_stale_resource_version_is_a_409_conflict(served: SimServer) -> None:
    api = _api(served)
    pod = api.read_namespaced_pod("web", "default")
    stale = pod.metadata.resource_version
    api.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"v": "1"}}})
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_pod(
            "web", "default", {"metadata": {"resourceVersion": stale, "labels": {"v": "2"}}}
        )
    assert err.value.status == 409
    assert "the object has been modified" in err.value.body
    pod.metadata.labels = {"v": "3"}
    with pytest.raises(ApiException) as err:
        api.replace_namespaced_pod("web", "default", pod)
    assert err.value.status == 409
    fresh = api.read_namespaced_pod("web", "default")
    fresh.metadata.labels = {"v": "3"}
    replaced = api.replace_namespaced_pod("web", "default", fresh)
    assert replaced.metadata.labels == {"v": "3"}


def test_a_pod_update_may_change_the_image_but_not_the_node(served: SimServer) -> None:
    api = _api(served)
    body = {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}
    patched = api.patch_namespaced_pod("web", "default", body)
    assert patched.spec.containers[0].image == "nginx:1.28"
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_pod("web", "default", {"spec": {"nodeName": "n2"}})
    assert err.value.status == 422
    assert "pod updates may not change fields other than" in err.value.body
    with pytest.raises(ApiException) as err:
        api.patch_namespaced_pod(
            "web", "default", {"metadata": {}}, _content_type="application/apply-patch+yaml"
        )
    assert err.value.status == 415


def test_kubectl_labels_annotates_and_cordons(served: SimServer, tmp_path: Path) -> None:
    labelled = _kubectl(served, tmp_path, "label", "pod", "web", "tier=front")
    assert labelled.returncode == 0, labelled.stderr
    assert labelled.stdout.strip() == "pod/web labeled"
    annotated = _kubectl(served, tmp_path, "annotate", "pod", "web", "owner=sre")
    assert annotated.stdout.strip() == "pod/web annotated", annotated.stderr
    removed = _kubectl(served, tmp_path, "label", "pod", "web", "tier-")
    assert removed.stdout.strip() == "pod/web unlabeled", removed.stderr
    pod = _api(served).read_namespaced_pod("web", "default")
    assert "tier" not in (pod.metadata.labels or {})
    assert pod.metadata.annotations["owner"] == "sre"
    cordoned = _kubectl(served, tmp_path, "cordon", "n1")
    assert cordoned.stdout.strip() == "node/n1 cordoned", cordoned.stderr
    assert _api(served).read_node("n1").spec.unschedulable is True
    time.sleep(0.2)


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeName: n1
      containers:
      - name: nginx
        image: nginx:1.27.3-alpine
"""


def _wait(condition: object, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def test_kubectl_applies_a_deployment_with_a_nodename_template_and_deletes_it(
    served: SimServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "deployment.yaml"
    manifest.write_text(DEPLOYMENT)
    applied = _kubectl(served, tmp_path, "apply", "-f", str(manifest))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.strip() == "deployment.apps/web created"
    apps = client.AppsV1Api(client.ApiClient(client.Configuration(host=served.address)))
    _wait(
        lambda: (apps.read_namespaced_deployment("web", "default").status.ready_replicas or 0) == 3
    )
    pods = [
        p
        for p in _api(served).list_namespaced_pod("default", label_selector="app=web").items
        if p.metadata.owner_references
    ]
    assert len(pods) == 3
    assert {p.spec.node_name for p in pods} == {"n1"}
    (rs,) = apps.list_namespaced_replica_set("default").items
    assert pods[0].metadata.owner_references[0].uid == rs.metadata.uid
    assert rs.metadata.owner_references[0].name == "web"
    got = _kubectl(served, tmp_path, "get", "deployments")
    assert got.stdout.split("\n")[1].split()[:4] == ["web", "3/3", "3", "3"], got.stdout
    again = _kubectl(served, tmp_path, "apply", "-f", str(manifest))
    assert again.stdout.strip() == "deployment.apps/web unchanged", again.stderr
    scaled = _kubectl(served, tmp_path, "scale", "deployment", "web", "--replicas=2")
    assert scaled.stdout.strip() == "deployment.apps/web scaled", scaled.stderr
    assert apps.read_namespaced_deployment_scale("web", "default").spec.replicas == 2
    _wait(lambda: apps.read_namespaced_deployment("web", "default").status.replicas == 2)
    patched = _kubectl(
        served, tmp_path, "patch", "deployment", "web", "-p", '{"spec":{"replicas":1}}'
    )
    assert patched.stdout.strip() == "deployment.apps/web patched", patched.stderr
    _wait(lambda: apps.read_namespaced_deployment("web", "default").status.replicas == 1)
    deleted = _kubectl(served, tmp_path, "delete", "deployment", "web")
    assert deleted.stdout.strip() == 'deployment.apps "web" deleted', deleted.stderr
    assert apps.list_namespaced_replica_set("default").items == []
    _wait(lambda: not _api(served).list_namespaced_pod("default", label_selector="app=web").items)


def test_a_deployment_whose_selector_misses_its_labels_is_invalid(
    served: SimServer, tmp_path: Path
) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(DEPLOYMENT.replace("matchLabels: {app: web}", "matchLabels: {app: api}"))
    applied = _kubectl(served, tmp_path, "apply", "-f", str(manifest))
    assert applied.returncode != 0
    assert "`selector` does not match template `labels`" in applied.stderr


def test_the_client_lists_watches_and_gets_replicasets_and_jobs() -> None:
    cluster = steady(Options(seed=2))
    cluster.loop.run(until=120.0)
    server = SimServer(cluster, speed=20.0)
    server.start()
    try:
        config = client.Configuration(host=server.address)
        apps = client.AppsV1Api(client.ApiClient(config))
        batch = client.BatchV1Api(client.ApiClient(config))
        deployments = apps.list_deployment_for_all_namespaces().items
        names = {d.metadata.name for d in deployments}
        assert {"frontend", "api", "cart", "search", "worker", "redis"} <= names
        for dep in deployments:
            assert dep.status.observed_generation == dep.metadata.generation
        listed = batch.list_job_for_all_namespaces()
        assert listed.items
        job = batch.read_namespaced_job(listed.items[0].metadata.name, "batch")
        assert job.spec.selector.match_labels
        seen = [
            e["type"]
            for e in watch.Watch().stream(
                batch.list_job_for_all_namespaces,
                resource_version=listed.metadata.resource_version,
                timeout_seconds=3,
            )
        ]
        assert "ADDED" in seen or "MODIFIED" in seen
        sets = apps.list_replica_set_for_all_namespaces(label_selector="app=api").items
        assert all(s.metadata.owner_references[0].kind == "Deployment" for s in sets)
    finally:
        server.stop()
