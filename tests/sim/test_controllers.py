"""PodGC, node lifecycle and taint eviction, static pods, workload controllers."""

from __future__ import annotations

import re

from handoff.sim.objects import parse_stamp

from .helpers import Capture, condition, nginx, small_cluster


def test_podgc_deletes_an_orphan_40_to_80_seconds_after_creation_without_events() -> None:
    cluster = small_cluster()
    cluster.add_node("worker-2")
    cap = Capture(cluster)
    created = cluster.create_pod(nginx("ghost3", node_name="worker-3"))
    cap.run(120)
    seen = cap.pods("ghost3")
    assert [t for _, t, _ in seen] == ["ADDED", "MODIFIED", "DELETED"]
    gone = seen[-1][0] - parse_stamp(created["metadata"]["creationTimestamp"])
    assert 40 <= gone <= 81
    final = seen[-1][2]
    assert final["status"]["phase"] == "Failed"
    cond = condition(final, "DisruptionTarget")
    assert (cond["reason"], cond["message"]) == ("DeletionByPodGC", "PodGC: node no longer exists")
    assert "deletionTimestamp" not in final["metadata"]
    assert cap.events("ghost3") == []
    assert [m for _, m, _ in cluster.podgc.log] == [
        "PodGC is force deleting Pod",
        "Forced deletion of orphaned Pod succeeded",
    ]


def test_podgc_can_behave_like_older_controller_managers_without_the_condition() -> None:
    """pkg/controller/podgc/gc_controller.go before 1.26: a bare Delete(grace 0), no status
    change, so the pod is last seen Pending (FIDELITY_AUDIT G2/G4)."""
    cluster = small_cluster(podgc_condition=False)
    cap = Capture(cluster)
    cluster.create_pod(nginx("ghost", node_name="nowhere"))
    cap.run(100)
    seen = cap.pods("ghost")
    assert seen[-1][1] == "DELETED"
    final = seen[-1][2]
    assert final["status"]["phase"] == "Pending"
    assert condition(final, "DisruptionTarget") is None


def test_podgc_deletes_the_oldest_terminated_pods_past_its_threshold() -> None:
    cluster = small_cluster()
    cluster.podgc.terminated_threshold = 3
    api = cluster.api
    cap = Capture(cluster)
    for i in range(5):
        cluster.create_pod(nginx(f"done-{i}"))
        current = api.get("pods", "default", f"done-{i}")
        phase = "Succeeded" if i % 2 else "Failed"
        api.update("pods", {**current, "status": {**current["status"], "phase": phase}})
        cap.run(1.5)
    cluster.create_pod(nginx("waiting"))
    assert api.terminal_pods == 5
    cap.run(25)
    left = sorted(name for _, name in api.stores["pods"].objects)
    assert left == ["done-2", "done-3", "done-4", "waiting"]
    assert api.terminal_pods == 3
    api.delete("pods", "default", "done-3")
    assert api.terminal_pods == 2


def test_node_lifecycle_marks_a_silent_node_unknown_and_evicts_after_300s() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("p", node_name="n1"))
    cap.run(20)
    cluster.fault("n1", "stop")
    stopped = cluster.now
    cap.run(60)
    node = cluster.api.get("nodes", "", "n1")
    ready = condition(node, "Ready")
    assert ready["status"] == "Unknown"
    assert ready["reason"] == "NodeStatusUnknown"
    assert ready["message"] == "Kubelet stopped posting node status."
    assert 40 <= parse_stamp(ready["lastTransitionTime"]) - stopped <= 56
    assert {(t["key"], t["effect"]) for t in node["spec"]["taints"]} == {
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    }
    assert cap.events("n1", "NodeNotReady")[0]["message"] == "Node n1 status is now: NodeNotReady"
    assert cap.events("p", "NodeNotReady")[0]["message"] == "Node is not ready"
    assert condition(cap.last("p"), "Ready")["status"] == "False"
    cap.run(300)
    (eviction,) = cap.events("p", "TaintManagerEviction")
    assert eviction["message"] == "Marking for deletion Pod default/p"
    assert eviction["source"] == {"component": "taint-eviction-controller"}
    pod = cap.last("p")
    assert pod["metadata"]["deletionTimestamp"]
    assert condition(pod, "DisruptionTarget")["reason"] == "DeletionByTaintManager"


def test_a_noexecute_taint_evicts_an_untolerating_pod_at_once() -> None:
    cluster = small_cluster()
    cluster.add_node("worker-1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("pinned", node_name="worker-1"))
    cap.run(20)
    cluster.taint("worker-1", "maintenance", "true", "NoExecute")
    cap.run(40)
    assert cap.events("pinned", "TaintManagerEviction")
    assert cap.events("pinned", "Killing")
    assert cap.pods("pinned")[-1][1] == "DELETED"


def test_static_pods_get_mirror_pods_that_come_back_when_deleted() -> None:
    from handoff.sim.scenarios.manifests import control_plane

    cluster = small_cluster()
    control_plane(cluster)
    cap = Capture(cluster)
    cap.run(10)
    mirror = cap.last("kube-scheduler-control-plane")
    ann = mirror["metadata"]["annotations"]
    assert ann["kubernetes.io/config.source"] == "file"
    assert ann["kubernetes.io/config.mirror"] == ann["kubernetes.io/config.hash"]
    assert "kubernetes.io/config.seen" in ann
    (owner,) = mirror["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"], owner["name"], owner["controller"]) == (
        "v1",
        "Node",
        "control-plane",
        True,
    )
    assert mirror["status"]["phase"] == "Running"
    first_uid = mirror["metadata"]["uid"]
    cluster.delete_pod("kube-system", "kube-scheduler-control-plane")
    cap.run(10)
    types = [t for _, t, _ in cap.pods("kube-scheduler-control-plane")]
    assert "DELETED" in types
    assert types[-1] != "DELETED"
    assert cap.last("kube-scheduler-control-plane")["metadata"]["uid"] != first_uid


def test_a_deployment_creates_named_owned_pods_and_a_nodename_template_pins_them_all() -> None:
    cluster = small_cluster()
    cluster.add_node("worker-1")
    cluster.add_node("worker-2")
    cap = Capture(cluster)
    template = {
        "metadata": {"labels": {"app": "web"}},
        "spec": nginx("x", node_name="worker-2")["spec"],
    }
    cluster.deployments.apply("default", "web", template, 3)
    cap.run(20)
    pods = cluster.api.list("pods")[0]
    assert len(pods) == 3
    for pod in pods:
        assert re.fullmatch(
            r"web-[bcdfghjklmnpqrstvwxz2456789]{10}-[bcdfghjklmnpqrstvwxz2456789]{5}",
            pod["metadata"]["name"],
        )
        assert pod["spec"]["nodeName"] == "worker-2"
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
        assert pod["metadata"]["labels"]["pod-template-hash"]
        assert pod["status"]["phase"] == "Running"
    assert len(cap.events(reason="SuccessfulCreate")) == 3
    assert cap.events(reason="Scheduled") == []


def test_a_rollout_replaces_every_pod() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    spec = nginx("x")["spec"]
    cluster.deployments.apply(
        "default", "web", {"metadata": {"labels": {"app": "web"}}, "spec": spec}, 2
    )
    cap.run(20)
    old = {p["metadata"]["name"] for p in cluster.api.list("pods")[0]}
    new_spec = nginx("x", image="nginx:1.28.0-alpine")["spec"]
    cluster.deployments.apply(
        "default", "web", {"metadata": {"labels": {"app": "web"}}, "spec": new_spec}, 2
    )
    cap.run(120)
    now = {p["metadata"]["name"] for p in cluster.api.list("pods")[0]}
    assert len(now) == 2
    assert not now & old


def test_a_job_runs_to_completion_and_drops_its_finalizer() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    spec = nginx("x", restart_policy="Never")["spec"]
    template = {"metadata": {"annotations": {"sim.handoff/run-seconds": "5"}}, "spec": spec}
    cluster.jobs.create("default", "batch", template, completions=2, parallelism=1)
    cap.run(120)
    pods = cluster.api.list("pods")[0]
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert all("finalizers" not in p["metadata"] for p in pods)
    assert cap.events("batch", "Completed")


def test_removing_a_static_pod_manifest_takes_its_mirror_pod_away() -> None:
    from handoff.sim.scenarios.manifests import control_plane

    cluster = small_cluster()
    control_plane(cluster)
    cap = Capture(cluster)
    cap.run(10)
    removed_at = cluster.now
    cluster.kubelets["control-plane"].remove_static("kube-scheduler")
    cap.run(120)
    seen = cap.pods("kube-scheduler-control-plane")
    assert seen[-1][1] == "DELETED"
    assert 20 <= seen[-1][0] - removed_at <= 51
    assert cap.events("kube-scheduler-control-plane", "Killing")
    assert cap.pods("etcd-control-plane")[-1][1] != "DELETED"


def test_deployments_and_their_replicasets_are_api_objects_with_status() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    template = {"metadata": {"labels": {"app": "web"}}, "spec": nginx("x")["spec"]}
    cluster.deployments.apply("default", "web", template, 2)
    cap.run(30)
    dep = cluster.api.get("deployments", "default", "web")
    assert dep["status"]["readyReplicas"] == 2
    assert dep["status"]["observedGeneration"] == dep["metadata"]["generation"] == 1
    (rs,) = cluster.api.list("replicasets")[0]
    assert rs["status"]["availableReplicas"] == 2
    assert rs["metadata"]["ownerReferences"][0]["uid"] == dep["metadata"]["uid"]
    # A spec change that touches no ReplicaSet still moves observedGeneration.
    cluster.deployments.update_object({**dep, "spec": {**dep["spec"], "revisionHistoryLimit": 3}})
    cap.run(5)
    dep = cluster.api.get("deployments", "default", "web")
    assert dep["metadata"]["generation"] == 2
    assert dep["status"]["observedGeneration"] == 2
    cluster.deployments.apply("default", "web", template, 1)
    cap.run(60)
    assert len([p for p in cluster.api.list("pods")[0] if p["status"]["phase"] == "Running"]) == 1
