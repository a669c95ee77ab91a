"""Event aggregation, a kubelet reporting NotReady, node-pressure eviction, and the kubelet's
NodeName/NodePorts admission checks."""

from __future__ import annotations

from handoff.sim.components.events import CoreRecorder

from .helpers import Capture, condition, nginx, small_cluster


def test_it_combines_the_tenth_similar_event_and_counts_the_rest_on_it() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    pod = cluster.create_pod(nginx("noisy", node_name="n1"))
    cap.run(10)
    recorder = CoreRecorder(cluster.api, "test-controller")
    for i in range(12):
        recorder.event(pod, "Warning", "Probe", f"attempt {i} failed")
        cap.run(30)  # well inside the 10-minute window
    probes = cap.events("noisy", "Probe")
    messages = [e["message"] for e in probes]
    assert messages[:9] == [f"attempt {i} failed" for i in range(9)]
    combined = [e for e in probes if e["message"].startswith("(combined from similar events): ")]
    assert [e["message"] for e in combined] == [
        "(combined from similar events): attempt 9 failed",
        "(combined from similar events): attempt 10 failed",
        "(combined from similar events): attempt 11 failed",
    ]
    # One combined Event, updated in place: the same name, count 1, 2, 3.
    assert len({e["metadata"]["name"] for e in combined}) == 1
    assert [e["count"] for e in combined] == [1, 2, 3]


def test_it_starts_afresh_after_ten_quiet_minutes() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    pod = cluster.create_pod(nginx("calm", node_name="n1"))
    cap.run(10)
    recorder = CoreRecorder(cluster.api, "test-controller")
    for i in range(12):
        recorder.event(pod, "Warning", "Probe", f"attempt {i} failed")
        cap.run(601)
    assert not [e for e in cap.events("calm", "Probe") if "combined" in e["message"]]


def _events_on_node(cap: Capture, node: str, reason: str) -> list[dict]:
    return [
        e
        for _, ty, e in cap.lines
        if e.get("kind") == "Event"
        and ty != "BOOKMARK"
        and e["involvedObject"]["kind"] == "Node"
        and e["involvedObject"]["name"] == node
        and e["reason"] == reason
    ]


def test_a_kubelet_reporting_not_ready_gets_the_not_ready_taint_and_its_pods_evicted() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("web", node_name="n1"))
    cap.run(20)
    cluster.fault("n1", "not-ready")
    cap.run(30)
    node = [o for _, _, o in cap.lines if o.get("kind") == "Node"][-1]
    ready = condition(node, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "KubeletNotReady")
    assert "cni plugin not initialized" in ready["message"]
    taints = {(t["key"], t["effect"]) for t in node["spec"]["taints"]}
    assert taints == {
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
    }
    sources = [e["source"]["component"] for e in _events_on_node(cap, "n1", "NodeNotReady")]
    assert sorted(sources) == ["kubelet", "node-controller"]
    assert condition(cap.last("web"), "Ready")["status"] == "False"
    assert [e["message"] for e in cap.events("web", "NodeNotReady")] == ["Node is not ready"]
    # The default 300 s toleration of not-ready runs out: the taint manager evicts it.
    cap.run(320)
    assert [e["message"] for e in cap.events("web", "TaintManagerEviction")] == [
        "Marking for deletion Pod default/web"
    ]
    assert cap.pods("web")[-1][1] == "DELETED"
    cluster.fault("n1", "resume")
    cap.run(30)
    assert [e["source"]["component"] for e in _events_on_node(cap, "n1", "NodeReady")] == [
        "kubelet"
    ]


def test_memory_pressure_evicts_a_pod_and_leaves_it_failed_evicted() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    cluster.create_pod(nginx("burstable", node_name="n1", cpu="100m", memory="64Mi"))
    cluster.create_pod(nginx("besteffort", node_name="n1"))
    cap.run(20)
    cluster.fault("n1", "memory-pressure")
    cap.run(40)
    pod = cap.last("besteffort")
    status = pod["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    message = (
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 92160Ki. "
        "Container nginx was using 256Mi, request is 0, has larger consumption of memory. "
    )
    assert status["message"] == message
    target = condition(pod, "DisruptionTarget")
    assert (target["status"], target["reason"], target["message"]) == (
        "True",
        "TerminationByKubelet",
        message,
    )
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    assert [e["message"] for e in cap.events("besteffort", "Evicted")] == [message]
    assert cap.events("besteffort", "Evicted")[0]["type"] == "Warning"
    # Not deleted: the Failed pod stays in the API; the other pod keeps running.
    assert cap.pods("besteffort")[-1][1] == "MODIFIED"
    assert cap.last("burstable")["status"]["phase"] == "Running"
    reasons = [e["reason"] for e in _events_on_node(cap, "n1", "NodeHasInsufficientMemory")]
    assert reasons == ["NodeHasInsufficientMemory"]
    node = [o for _, _, o in cap.lines if o.get("kind") == "Node"][-1]
    assert condition(node, "MemoryPressure")["status"] == "True"
    assert {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    # One eviction relieves it; the condition clears 5 minutes later (transition period).
    cap.run(320)
    node = [o for _, _, o in cap.lines if o.get("kind") == "Node"][-1]
    assert condition(node, "MemoryPressure")["status"] == "False"
    assert "taints" not in node["spec"]
    assert _events_on_node(cap, "n1", "NodeHasSufficientMemory")


def test_the_kubelet_rejects_a_host_port_already_taken_with_nodeports() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cap = Capture(cluster)
    first = nginx("first", node_name="n1")
    first["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    second = nginx("second", node_name="n1")
    second["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    cluster.create_pod(first)
    cap.run(10)
    cluster.create_pod(second)
    cap.run(10)
    status = cap.last("second")["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "NodePorts")
    assert status["message"] == (
        "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for "
        "the requested pod ports"
    )
    assert cap.last("first")["status"]["phase"] == "Running"


def test_the_kubelet_rejects_a_pod_for_another_node_with_nodename() -> None:
    cluster = small_cluster()
    kubelet = cluster.add_node("n1")
    cluster.loop.run(until=1)
    other = cluster.api.create("pods", nginx("elsewhere", node_name="n2"))
    assert kubelet.admission_failure(other) == (
        "NodeName",
        "Predicate NodeName failed: node(s) didn't match the requested node name",
    )


def _with_host_port(name: str, port: int, ip: str | None = None) -> dict:
    body = nginx(name)
    spec_port: dict = {"containerPort": 80, "hostPort": port}
    if ip:
        spec_port["hostIP"] = ip
    body["spec"]["containers"][0]["ports"] = [spec_port]
    return body


def test_the_scheduler_filters_nodes_whose_host_port_is_taken() -> None:
    cluster = small_cluster()
    cluster.add_node("n1")
    cluster.add_node("n2")
    cap = Capture(cluster)
    for name in ("a", "b", "c"):
        cluster.create_pod(_with_host_port(name, 8080))
        cap.run(5)
    nodes = {cap.last(n)["spec"].get("nodeName") for n in ("a", "b")}
    assert nodes == {"n1", "n2"}  # the second went to the node whose port was free
    assert "nodeName" not in cap.last("c")["spec"]
    (failed,) = cap.events("c", "FailedScheduling")
    assert failed["message"] == (
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod "
        "ports. preemption: 0/2 nodes are available: 2 Preemption is not helpful for "
        "scheduling."
    )
    # A specific hostIP still conflicts with the 0.0.0.0 (the default) that a and b hold.
    cluster.create_pod(_with_host_port("d", 8080, "10.0.0.1"))
    cap.run(5)
    assert "nodeName" not in cap.last("d")["spec"]
    cluster.delete_pod("default", "a")
    cap.run(60)
    # a's node is free again: one of the waiting pods gets it.
    placed = [n for n in ("c", "d") if cap.last(n)["spec"].get("nodeName")]
    assert len(placed) == 1
