"""kube-scheduler: filters, messages, assume cache, binding, retries."""

from __future__ import annotations

from handoff.sim.components.scheduler import fit_error

from .helpers import Capture, condition, nginx, small_cluster

TAINT = {"key": "dedicated", "value": "reports", "effect": "NoSchedule"}


def test_it_never_binds_to_a_noschedule_node_without_a_toleration() -> None:
    cluster = small_cluster()
    cluster.add_node("tainted", taints=[TAINT])
    cap = Capture(cluster)
    cluster.create_pod(nginx("plain"))
    cap.run(30)
    pod = cap.last("plain")
    assert "nodeName" not in pod["spec"]
    failed = cap.events("plain", "FailedScheduling")
    assert failed[0]["message"] == (
        "0/1 nodes are available: 1 node(s) had untolerated taint(s). preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling."
    )
    assert failed[0]["reportingComponent"] == "default-scheduler"
    assert failed[0]["source"] == {}
    cond = condition(pod, "PodScheduled")
    assert cond["status"] == "False"
    assert cond["reason"] == "Unschedulable"


def test_it_binds_a_tolerating_pod_and_records_scheduled() -> None:
    cluster = small_cluster()
    cluster.add_node("tainted", taints=[TAINT])
    cap = Capture(cluster)
    cluster.create_pod(nginx("ok", tolerations=[{"key": "dedicated", "operator": "Exists"}]))
    cap.run(10)
    assert cap.last("ok")["spec"]["nodeName"] == "tainted"
    (event,) = cap.events("ok", "Scheduled")
    assert event["message"] == "Successfully assigned default/ok to tainted"
    assert event["action"] == "Binding"


def test_it_can_name_the_taint_like_schedulers_before_1_32() -> None:
    cluster = small_cluster()
    cluster.scheduler.t.legacy_taint_message = True
    cluster.add_node("tainted", taints=[TAINT])
    cap = Capture(cluster)
    cluster.create_pod(nginx("plain"))
    cap.run(5)
    message = cap.events("plain", "FailedScheduling")[0]["message"]
    assert message.startswith(
        "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: reports}."
    )


def test_it_reserves_assumed_capacity_so_two_big_pods_do_not_share_a_node() -> None:
    cluster = small_cluster()
    cluster.add_node("n1", cpu="4")
    cap = Capture(cluster)
    cluster.create_pod(nginx("a", cpu="3"))
    cluster.create_pod(nginx("b", cpu="3"))
    cap.run(20)
    placed = [cap.last(n)["spec"].get("nodeName") for n in ("a", "b")]
    assert placed.count("n1") == 1
    loser = "a" if placed[1] == "n1" else "b"
    assert "1 Insufficient cpu" in cap.events(loser, "FailedScheduling")[0]["message"]


def test_it_retries_an_unschedulable_pod_when_a_node_arrives() -> None:
    cluster = small_cluster()
    cluster.add_node("small", cpu="1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("big", cpu="2"))
    cap.run(5)
    cluster.add_node("large", cpu="8")
    cap.run(15)
    assert cap.last("big")["spec"]["nodeName"] == "large"


def test_it_sorts_reasons_like_the_fit_error() -> None:
    message = fit_error(3, {"node(s) had untolerated taint(s)": 1, "Insufficient cpu": 2})
    assert message == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient cpu. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_it_leaves_pods_with_another_scheduler_name_alone() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("custom", scheduler_name="my-scheduler"))
    cap.run(10)
    assert "nodeName" not in cap.last("custom")["spec"]
    assert cap.events("custom") == []
