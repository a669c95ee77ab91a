"""The kubelet: admission messages, status writes, images, crash loops, termination."""

from __future__ import annotations

from .helpers import Capture, condition, nginx, small_cluster

NOSCHEDULE = {"key": "dedicated", "value": "reports", "effect": "NoSchedule"}


def test_it_runs_a_nodename_pod_on_a_noschedule_tainted_node() -> None:
    cluster = small_cluster()
    cluster.add_node("worker-1", taints=[NOSCHEDULE])
    cap = Capture(cluster)
    cluster.create_pod(nginx("pinned", node_name="worker-1"))
    cap.run(20)
    pod = cap.last("pinned")
    assert pod["status"]["phase"] == "Running"
    assert condition(pod, "Ready")["status"] == "True"
    assert cap.events("pinned", "Scheduled") == []
    assert [e["reason"] for e in cap.events("pinned")] == [
        "Pulling",
        "Pulled",
        "Created",
        "Started",
    ]


def test_its_first_status_write_has_start_time_and_conditions_in_kubelet_order() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("p", node_name="n1"))
    cap.run(20)
    first = cap.pods("p")[1][2]["status"]
    assert first["startTime"]
    assert first["hostIP"] == "172.18.0.3"
    assert [c["type"] for c in first["conditions"]] == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert condition(cap.pods("p")[1][2], "PodScheduled")["status"] == "True"
    assert first["containerStatuses"][0]["state"] == {"waiting": {"reason": "ContainerCreating"}}


def _rejected(pod_name: str, **kwargs: object) -> tuple[dict, list]:
    cluster = small_cluster()
    cluster.add_node("worker-2", cpu="4", memory="8Gi")
    cap = Capture(cluster)
    cluster.create_pod(nginx("small", node_name="worker-2", cpu="950m"))
    cap.run(10)
    cluster.create_pod(nginx(pod_name, node_name="worker-2", **kwargs))
    cap.run(10)
    return cap.last(pod_name), cap.events(pod_name)


def test_it_rejects_outofcpu_with_the_exact_kubelet_message() -> None:
    pod, events = _rejected("bigcpu", cpu="100")
    message = "Node didn't have enough resource: cpu, requested: 100000, used: 950, capacity: 4000"
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "OutOfcpu"
    assert pod["status"]["message"] == f"Pod was rejected: {message}"
    assert pod["status"]["startTime"]
    assert "conditions" not in pod["status"]
    (event,) = events
    assert (event["type"], event["reason"], event["message"]) == ("Warning", "OutOfcpu", message)
    assert event["source"] == {"component": "kubelet", "host": "worker-2"}


def test_it_rejects_outofmemory_in_bytes() -> None:
    pod, _ = _rejected("bigmem", memory="100Gi")
    assert pod["status"]["reason"] == "OutOfmemory"
    assert pod["status"]["message"] == (
        "Pod was rejected: Node didn't have enough resource: memory, requested: 107374182400, "
        "used: 0, capacity: 8589934592"
    )


def test_it_rejects_a_node_selector_mismatch_as_nodeaffinity() -> None:
    pod, events = _rejected("badsel", node_selector={"disktype": "ssd"})
    assert pod["status"]["reason"] == "NodeAffinity"
    assert events[0]["message"] == (
        "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
    )


def test_it_refuses_an_untolerated_noexecute_taint_at_admission_or_is_evicted() -> None:
    cluster = small_cluster()
    taint = {"key": "maintenance", "value": "true", "effect": "NoExecute"}
    kubelet = cluster.add_node("n1", taints=[taint])
    assert kubelet.admission_failure(nginx("p", node_name="n1")) == (
        "TaintToleration",
        "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
    )
    cap = Capture(cluster)
    cluster.create_pod(nginx("p", node_name="n1"))
    cap.run(40)
    # Which comes first, admission or the taint-eviction controller, is a race (HANDOFF_FACTS 2).
    last = cap.pods("p")[-1]
    assert last[2]["status"].get("reason") == "TaintToleration" or last[1] == "DELETED"


def test_it_rejects_past_the_pod_limit_as_outofpods() -> None:
    cluster = small_cluster()
    cluster.add_node("n1", pods=1)
    cap = Capture(cluster)
    cluster.create_pod(nginx("one", node_name="n1"))
    cluster.create_pod(nginx("two", node_name="n1"))
    cap.run(5)
    assert cap.last("two")["status"]["message"] == (
        "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 1, "
        "capacity: 1"
    )


def test_it_reports_errimagepull_then_imagepullbackoff() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("bad", node_name="n1", image="nginx:doesnotexist"))
    cap.run(60)
    reasons = [(e["reason"], e["message"][:22]) for e in cap.events("bad")]
    assert ("Failed", "Error: ErrImagePull") in reasons
    assert ("BackOff", "Back-off pulling image") in reasons
    waiting = {
        p["status"]["containerStatuses"][0]["state"].get("waiting", {}).get("reason")
        for _, _, p in cap.pods("bad")
        if p["status"].get("containerStatuses")
    }
    assert {"ErrImagePull", "ImagePullBackOff"} <= waiting
    assert cap.last("bad")["status"]["phase"] == "Pending"


def test_it_crash_loops_with_backoff() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("crash", node_name="n1", annotations={"sim.handoff/crash": "2"}))
    cap.run(120)
    last = cap.last("crash")["status"]["containerStatuses"][0]
    assert last["restartCount"] >= 3
    assert any(e["reason"] == "BackOff" for e in cap.events("crash"))
    states = [
        p["status"]["containerStatuses"][0]["state"]
        for _, _, p in cap.pods("crash")
        if p["status"].get("containerStatuses")
    ]
    assert {"reason": "CrashLoopBackOff"}.items() <= next(
        s["waiting"] for s in states if s.get("waiting", {}).get("reason") == "CrashLoopBackOff"
    ).items()


def test_it_kills_then_deletes_with_grace_zero_on_graceful_delete() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("p", node_name="n1"))
    cap.run(20)
    cluster.delete_pod("default", "p")
    cap.run(40)
    types = [t for _, t, _ in cap.pods("p")]
    assert types[-1] == "DELETED"
    assert cap.pods("p")[-1][2]["metadata"]["deletionGracePeriodSeconds"] == 0
    assert cap.events("p", "Killing")[0]["message"] == "Stopping container nginx"


def test_a_hung_kubelet_leaves_the_pod_pending_with_its_node_name() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cluster.fault("n1", "hang")
    cap = Capture(cluster)
    cluster.create_pod(nginx("stale"))
    cap.run(120)
    pod = cap.last("stale")
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["status"]["phase"] == "Pending"
    assert "startTime" not in pod["status"]
    node = cluster.api.get("nodes", "", "n1")
    assert condition(node, "Ready")["status"] == "True"  # heartbeats go on
    cluster.fault("n1", "resume")
    cap.run(20)
    assert cap.last("stale")["status"]["phase"] == "Running"


def test_it_completes_a_run_to_completion_pod() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(
        nginx(
            "once",
            node_name="n1",
            restart_policy="Never",
            annotations={"sim.handoff/run-seconds": "3"},
        )
    )
    cap.run(30)
    status = cap.last("once")["status"]
    assert status["phase"] == "Succeeded"
    assert status["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


def test_a_restarted_kubelet_finishes_deletions_it_missed_while_stopped() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("p", node_name="n1"))
    cap.run(20)
    cluster.fault("n1", "stop")
    cluster.delete_pod("default", "p")
    cap.run(20)
    assert cap.pods("p")[-1][1] == "MODIFIED"  # Terminating: nobody to kill it
    cluster.fault("n1", "resume")
    cap.run(20)
    assert cap.pods("p")[-1][1] == "DELETED"
    assert cluster.kubelets["n1"].used_pods == 0
