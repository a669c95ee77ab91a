"""The control plane the k8s tests run against is a real one, locked down as a cluster is:
TLS verified against its CA, bearer tokens, RBAC, and Handoff's reader limited to
deploy/rbac.yaml's role."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devtools import controlplane
from devtools.fidelity import runs
from handoff.attach.kube import AttachError, KubeRemote
from handoff.sim.objects import NOT_READY_TAINT
from tests.k8s.nodes import node_status

WANTED = "v1.20.2"


def reader_api(kubeconfig: Path) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    k8s_config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration, persist_config=False
    )
    configuration.retries = False
    return k8s.ApiClient(configuration)


def test_it_is_the_version_the_docs_describe(control_plane: controlplane.ControlPlane) -> None:
    assert control_plane.version == WANTED
    with controlplane.admin_client(control_plane) as api:
        assert k8s.VersionApi(api).get_code().git_version == WANTED


def test_the_reader_reads_pods_nodes_and_events_of_both_groups(reader_kubeconfig: Path) -> None:
    with reader_api(reader_kubeconfig) as api:
        k8s.CoreV1Api(api).list_pod_for_all_namespaces(limit=1)
        k8s.CoreV1Api(api).list_node(limit=1)
        # Raw: the client's typed events.k8s.io model refuses the null eventTime that core/v1
        # Events (a kubelet's, ours attached included) have when read through that group.
        for listed in (
            k8s.CoreV1Api(api).list_event_for_all_namespaces(limit=1, _preload_content=False),
            k8s.EventsV1Api(api).list_event_for_all_namespaces(limit=1, _preload_content=False),
        ):
            assert listed.status == 200


@pytest.mark.parametrize(
    "call",
    [
        lambda core: core.list_secret_for_all_namespaces(limit=1),
        lambda core: core.list_config_map_for_all_namespaces(limit=1),
        lambda core: core.create_namespaced_pod(
            "default",
            {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
        ),
        lambda core: core.delete_node("anything"),
    ],
    ids=["list secrets", "list configmaps", "create a pod", "delete a node"],
)
def test_rbac_refuses_the_reader_everything_else(reader_kubeconfig: Path, call) -> None:
    with reader_api(reader_kubeconfig) as api, pytest.raises(k8s.ApiException) as refused:
        call(k8s.CoreV1Api(api))
    assert refused.value.status == 403


def test_tls_is_verified_against_the_ca(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    def version(cafile: Path) -> int:
        context = ssl.create_default_context(cafile=str(cafile))
        with urllib.request.urlopen(f"{control_plane.server}/version", context=context) as answer:
            return answer.status

    assert version(control_plane.ca) == 200
    other_ca = controlplane.make_ca(tmp_path, "other", "not-the-cluster-ca")
    with pytest.raises(urllib.error.URLError) as refused:
        version(other_ca)
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)


def test_an_unknown_token_is_unauthorized(
    control_plane: controlplane.ControlPlane, tmp_path: Path
) -> None:
    forged = control_plane.write_kubeconfig(tmp_path / "forged.kubeconfig", "x", "not-a-token")
    with reader_api(forged) as api, pytest.raises(k8s.ApiException) as refused:
        k8s.CoreV1Api(api).list_node(limit=1)
    assert refused.value.status == 401


def test_a_node_created_through_the_api_stays_unschedulable_until_the_controller_lifts_it(
    control_plane: controlplane.ControlPlane, admin: k8s.ApiClient
) -> None:
    """v1.20.2's TaintNodesByCondition admission puts ``not-ready:NoSchedule`` on every Node
    created through the API, whatever status it registers with; the node lifecycle
    controller keeps it while the node is not Ready and takes it off once it is. The
    simulator's nodes never carry it, so ``manage.py fidelity`` waits for this before it
    records (``wait_for_untainted_nodes``). The node is gone before the situations are
    staged on this control plane (they count its nodes)."""
    core = k8s.CoreV1Api(admin)
    name = "probe-admission-taint"
    status = node_status()
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    ready.update(status="False", reason="KubeletNotReady", message="container runtime is down")
    created = core.create_node({"metadata": {"name": name}, "status": status})
    remote = KubeRemote(str(control_plane.admin_kubeconfig))
    try:
        assert [(t.key, t.effect) for t in created.spec.taints] == [(NOT_READY_TAINT, "NoSchedule")]
        with pytest.raises(AttachError, match=f"{name} still carry {NOT_READY_TAINT}:NoSchedule"):
            runs.wait_for_untainted_nodes(remote, [name], timeout=2)

        ready.update(status="True", reason="KubeletReady", message="kubelet is ready")
        core.patch_node_status(
            name, {"status": status}, _content_type="application/strategic-merge-patch+json"
        )
        runs.wait_for_untainted_nodes(remote, [name], timeout=30)
        assert not core.read_node(name).spec.taints
    finally:
        core.delete_node(name)
    try:
        with pytest.raises(AttachError, match=f"reading node {name}: 404"):
            runs.wait_for_untainted_nodes(remote, [name])
    finally:
        remote.stop()
