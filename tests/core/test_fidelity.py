"""The fidelity audit's disagreements (../shared/FIDELITY_AUDIT.md §1), each on watch
streams shaped as the upstream file named in the test shapes them."""

from __future__ import annotations

import pytest

from tests.core.k8sshapes import (
    Script,
    cond,
    core_event,
    failed_status,
    node,
    pod,
    running_status,
    second,
)

NOT_READY_CNI = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
    " message:Network plugin returns error: cni plugin not initialized"
)
UNREACHABLE = [
    {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "x"},
]


def _running_on(script: Script, name: str, uid: str, created: float, worker: str) -> Script:
    """Created, bound by the scheduler, acknowledged and running on ``worker``."""
    script.add(created, "ADDED", pod(name, uid, created))
    bound = {"phase": "Pending", "conditions": [cond("PodScheduled", "True", created)]}
    script.add(created + 0.05, "MODIFIED", pod(name, uid, created, worker, bound))
    return script.add(
        created + 3, "MODIFIED", pod(name, uid, created, worker, running_status(created + 1))
    )


def _node_blip(script: Script, worker: str, down: float, up: float) -> Script:
    """node_lifecycle_controller.go: Ready=Unknown and the unreachable taints after the
    grace period; back to Ready, taints removed, when the kubelet posts again."""
    script.add(
        down,
        "MODIFIED",
        node(
            worker,
            -1e5,
            "Unknown",
            down,
            "NodeStatusUnknown",
            "Kubelet stopped posting node status.",
            UNREACHABLE,
        ),
    )
    return script.add(up, "MODIFIED", node(worker, -1e5, "True", up))


# ---------------------------------------------------------------- E6, R3


@pytest.mark.parametrize("controller", ["taint-controller", "taint-eviction-controller"])
def test_a_cancelled_taint_eviction_evicts_nothing(controller):
    """pkg/controller/nodelifecycle/scheduler/taint_manager.go (1.20-1.28; 1.29+
    pkg/controller/tainteviction): a node back within tolerationSeconds cancels the
    scheduled deletions, one "Cancelling deletion of Pod ns/name" per pod, no uid."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-1")
    _node_blip(script, "worker-1", 100, 190)
    cancel = core_event(
        "web-1",
        None,
        "TaintManagerEviction",
        "Cancelling deletion of Pod default/web-1",
        190,
        controller,
    )
    script.add(190.2, "ADDED", cancel)

    view = script.view("web-1", at=300)

    assert view["verdict"] == "running", view["explanation"]
    assert [e["message"] for e in view["events"]] == ["Cancelling deletion of Pod default/web-1"]


def test_a_marked_taint_eviction_still_evicts():
    """taint_manager.go emitPodDeletionEvent: "Marking for deletion Pod ns/name"."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-1")
    mark = core_event(
        "web-1",
        None,
        "TaintManagerEviction",
        "Marking for deletion Pod default/web-1",
        400,
        "taint-controller",
    )
    script.add(400.1, "ADDED", mark)

    assert script.view("web-1", at=401)["verdict"] == "evicted"


def test_an_event_without_uid_does_not_follow_the_name_to_a_recreated_pod():
    """taint_manager.go emitPodDeletionEvent: the involvedObject has no uid. A StatefulSet
    recreates web-0 under the same name; the old pod's event, relisted after the new pod
    (event TTL 1 h), belongs to the old pod."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-0", "u-old", 10, "worker-1")
    script.add(400, "DELETED", pod("web-0", "u-old", 10, "worker-1", running_status(11), 400))
    _running_on(script, "web-0", "u-new", 410, "worker-2")
    mark = core_event(
        "web-0",
        None,
        "TaintManagerEviction",
        "Marking for deletion Pod default/web-0",
        399,
        "taint-controller",
    )
    script.add(500, "ADDED", mark)

    assert script.view("web-0", at=520, uid="u-new")["verdict"] == "running"
    assert script.view("web-0", at=520, uid="u-old")["verdict"] == "evicted"


def test_an_old_event_without_uid_of_a_pod_never_seen_is_dropped():
    script = Script().add(0, "ADDED", node("worker-2", -1e5))
    _running_on(script, "web-0", "u-new", 410, "worker-2")
    mark = core_event(
        "web-0",
        None,
        "TaintManagerEviction",
        "Marking for deletion Pod default/web-0",
        300,
        "taint-controller",
    )
    script.add(500, "ADDED", mark)

    timeline = script.fold()

    assert script.view("web-0", at=520)["verdict"] == "running"
    assert timeline.skipped["Event about an earlier pod of that name"] == 1


# ------------------------------------------------------------------- N6, R4


def _bootstrapping_daemonset_pod(script: Script) -> Script:
    """pkg/kubelet/kubelet_node_status.go initialNode + nodestatus/setters.go: a new node
    posts Ready=False until its CNI is up, and node-controller adds not-ready:NoSchedule;
    a DaemonSet pod (tolerates it) is bound meanwhile and pulls a bad image."""
    taint = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    script.add(0, "ADDED", node("new-1", 0, "False", 0, "KubeletNotReady", NOT_READY_CNI, taint))
    owner = ("DaemonSet", "agent")
    script.add(2, "ADDED", pod("agent-x", "u-agent", 2, owner=owner))
    bound = {"phase": "Pending", "conditions": [cond("PodScheduled", "True", 2)]}
    script.add(2.1, "MODIFIED", pod("agent-x", "u-agent", 2, "new-1", bound, owner=owner))
    waiting = {
        "phase": "Pending",
        "hostIP": "10.0.0.9",
        "startTime": second(3),
        "conditions": [cond("Initialized", "True", 3), cond("PodScheduled", "True", 2)],
        "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}],
    }
    script.add(20, "MODIFIED", pod("agent-x", "u-agent", 2, "new-1", waiting, owner=owner))
    return script.add(30, "MODIFIED", node("new-1", 0, "True", 30))


def test_a_pod_bound_to_a_node_that_was_never_ready_is_not_node_lost():
    script = _bootstrapping_daemonset_pod(Script())

    assert script.view("agent-x", at=40)["verdict"] == "starting"
    late = script.view("agent-x", at=300)
    assert (late["verdict"], late["reason"]) == ("stuck", "ImagePullBackOff")


def test_a_node_that_was_ready_and_went_down_still_loses_its_pending_pods():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("web-1", "u-web-1", 10, "worker-1", owner=None))
    _node_blip(script, "worker-1", 12, 500)

    assert script.view("web-1", at=100)["verdict"] == "node-lost"


def test_a_relisted_node_not_ready_event_does_not_reopen_a_ready_node():
    """pkg/controller/util/node/controller_utils.go RecordNodeStatusChange: NodeNotReady
    events live an hour (event TTL); a relist replays them after the Node's current
    (Ready) state."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5, "True", -50))
    script.add(10, "ADDED", pod("web-1", "u-web-1", 10, "worker-1", owner=None))
    old = core_event(
        "worker-1",
        "uid-worker-1",
        "NodeNotReady",
        "Node worker-1 status is now: NodeNotReady",
        -100,
        "node-controller",
        kind="Node",
    )
    script.add(11, "ADDED", old)

    assert script.view("web-1", at=30)["verdict"] == "awaiting-kubelet"


def test_node_events_stand_in_for_an_unwatched_node():
    """Without a Node watch, NodeNotReady opens the node's outage and the kubelet's own
    NodeReady (pkg/kubelet/nodestatus/setters.go ReadyCondition) closes it."""
    script = Script()
    script.add(10, "ADDED", pod("web-1", "u-web-1", 10, "worker-1", owner=None))
    down = core_event(
        "worker-1",
        "uid-worker-1",
        "NodeNotReady",
        "Node worker-1 status is now: NodeNotReady",
        12,
        "node-controller",
        kind="Node",
    )
    up = core_event(
        "worker-1",
        "uid-worker-1",
        "NodeReady",
        "Node worker-1 status is now: NodeReady",
        20,
        "kubelet",
        kind="Node",
    )
    script.add(12.1, "ADDED", down).add(20.1, "ADDED", up)

    timeline = script.fold()

    assert [
        (round(a - 1_780_000_000), round(b - 1_780_000_000))
        for a, b, _ in timeline.nodes["worker-1"].down
    ] == [(12, 20)]


# ------------------------------------------------------------------- S2, R2


def _stage(view: dict, name: str) -> dict | None:
    return next((s for s in view["stages"] if s["name"] == name), None)


def test_a_kubelet_event_before_the_pod_still_closes_scheduling():
    """client-go tools/record: the kubelet's events are sent asynchronously, on their own
    watch; for a manual pod (nodeName at create, strategy.go PrepareForCreate) one can
    arrive before the Pod's ADDED."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    pulling = core_event(
        "manual", "u-manual", "Pulling", 'Pulling image "nginx"', 1, host="worker-1"
    )
    script.add(1.2, "ADDED", pulling)
    script.add(1.5, "ADDED", pod("manual", "u-manual", 1, "worker-1", owner=None))

    view = script.view("manual", at=5)

    assert view["milestones"]["bound"] is not None
    assert view["binding"] == "manual"
    assert not _stage(view, "scheduling")["open"]
    assert not _stage(view, "awaiting-kubelet")["open"]


def test_a_static_pods_events_before_its_mirror_still_close_scheduling():
    """pkg/kubelet/config/common.go applyDefaults (uid = config hash) and
    pkg/kubelet/pod/mirror_client.go CreateMirrorPod: the kubelet's events name the
    config hash and come before the mirror pod exists."""
    script = Script().add(0, "ADDED", node("cp-1", -1e5))
    for t, reason in ((1, "Pulled"), (1.1, "Created"), (1.2, "Started")):
        script.add(
            t + 0.05, "ADDED", core_event("etcd-cp-1", "hash-1", reason, reason, t, host="cp-1")
        )
    notes = {
        "kubernetes.io/config.hash": "hash-1",
        "kubernetes.io/config.mirror": "hash-1",
        "kubernetes.io/config.source": "file",
    }
    mirror = pod(
        "etcd-cp-1",
        "u-mirror",
        3,
        "cp-1",
        running_status(1),
        owner=("Node", "cp-1"),
        annotations=notes,
    )
    script.add(3.1, "ADDED", mirror)

    view = script.view("etcd-cp-1", at=10)

    assert (view["binding"], view["verdict"]) == ("static", "running")
    assert view["milestones"]["bound"] is not None
    assert [s["name"] for s in view["stages"] if s["open"]] == ["running"]


# ----------------------------------------------------------------------- V1


@pytest.mark.parametrize(("version", "sandbox"), [("1.28", False), ("1.29", True)])
def test_a_running_pod_has_no_open_stage_but_running(version, sandbox):
    """PodReadyToStartContainers is written by default from 1.29 (PR #119659,
    pkg/kubelet/kubelet_pods.go generateAPIPodStatus); 1.28 and earlier have none."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("web-1", "u-web-1", 10))
    bound = {"phase": "Pending", "conditions": [cond("PodScheduled", "True", 10)]}
    script.add(10.05, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", bound))
    script.add(13, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", running_status(11, sandbox)))

    view = script.view("web-1", at=600)

    assert [s["name"] for s in view["stages"] if s["open"]] == ["running"], version
    assert _stage(view, "sandbox")["end"] <= _stage(view, "running")["start"]


# ----------------------------------------------------------------- G7, G9


def _node_deleted_under_running_pod(reason: str, message: str) -> Script:
    """pkg/controller/podgc/gc_controller.go markFailedAndDeletePodWithCondition (1.26+):
    phase Failed plus DisruptionTarget, then a grace-0 delete; GKE's
    gcp-controller-manager does the same with its own reason."""
    script = Script().add(0, "ADDED", node("worker-2", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-2")
    script.add(100, "DELETED", node("worker-2", -1e5))
    gone = running_status(11)
    gone["phase"] = "Failed"
    gone["conditions"] = [
        *gone["conditions"],
        cond("DisruptionTarget", "True", 140, reason, message),
    ]
    script.add(140, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", gone))
    script.add(140.1, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", gone, deletion=140))
    return script.add(140.2, "DELETED", pod("web-1", "u-web-1", 10, "worker-2", gone, deletion=140))


def test_a_running_pod_of_a_deleted_node_gets_no_nodename_typo_advice():
    script = _node_deleted_under_running_pod("DeletionByPodGC", "PodGC: node no longer exists")

    view = script.view("web-1", at=200)

    assert (view["verdict"], view["reason"]) == ("podgc-deleted", "orphaned")
    assert "typo" not in view["explanation"]
    assert "nodeName" not in view["explanation"]
    assert "was deleted while the pod was on it" in view["explanation"]


def test_a_running_pod_of_a_deleted_node_is_podgc_deleted_before_1_26():
    """v1.20 gcOrphaned: no status change, no event; a grace-0 delete (MODIFIED with
    deletionTimestamp = now, then DELETED), as recorded on a real v1.20.2 control plane."""
    script = Script().add(0, "ADDED", node("worker-2", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-2")
    script.add(100, "DELETED", node("worker-2", -1e5))
    running = running_status(11)
    script.add(150.3, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", running, deletion=150))
    script.add(150.4, "DELETED", pod("web-1", "u-web-1", 10, "worker-2", running, deletion=150))

    view = script.view("web-1", at=200)

    assert (view["verdict"], view["reason"]) == ("podgc-deleted", "orphaned")
    assert "was deleted while the pod was on it" in view["explanation"]


def test_a_graceful_delete_left_by_a_deleted_node_is_finished_by_podgc():
    """Deleted with the default grace, its node deleted before the kubelet finished: the
    real v1.20.2 PodGC moves deletionTimestamp back to the request and deletes at grace 0."""
    script = Script().add(0, "ADDED", node("worker-2", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-2")
    running = running_status(11)
    script.add(90, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", running, deletion=120))
    script.add(100, "DELETED", node("worker-2", -1e5))
    script.add(160, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", running, deletion=90))
    script.add(160.1, "DELETED", pod("web-1", "u-web-1", 10, "worker-2", running, deletion=90))

    assert script.view("web-1", at=200)["verdict"] == "podgc-deleted"


def test_a_pod_its_kubelet_finished_before_the_node_went_is_not_podgcs():
    script = Script().add(0, "ADDED", node("worker-2", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-2")
    done = {**running_status(11), "phase": "Succeeded"}
    script.add(50, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", done))
    script.add(100, "DELETED", node("worker-2", -1e5))
    script.add(150.3, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-2", done, deletion=150))
    script.add(150.4, "DELETED", pod("web-1", "u-web-1", 10, "worker-2", done, deletion=150))

    assert script.view("web-1", at=200)["verdict"] != "podgc-deleted"


def test_a_pod_bound_to_a_node_that_never_existed_keeps_the_nodename_advice():
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("ghost", "u-ghost", 10, "worker-9", owner=None))
    script.add(60, "DELETED", pod("ghost", "u-ghost", 10, "worker-9", owner=None, deletion=60))

    view = script.view("ghost", at=70)

    assert (view["verdict"], view["reason"]) == ("podgc-deleted", "orphaned")
    assert "nodeName" in view["explanation"]


def test_gke_node_garbage_collection_is_podgc_deleted():
    """cloud-provider-gcp gcp-controller-manager: DeletionByGCPControllerManager."""
    script = _node_deleted_under_running_pod(
        "DeletionByGCPControllerManager", "GCPControllerManager: node no longer exists"
    )

    view = script.view("web-1", at=200)

    assert (view["verdict"], view["reason"]) == ("podgc-deleted", "DeletionByGCPControllerManager")
    assert "GKE" in view["explanation"]


# -------------------------------------------------------- P9, P10, K3, K5


SHUTDOWN_121 = "Pod was terminated in response to imminent node shutdown."


@pytest.mark.parametrize(
    ("version", "reason", "message", "condition"),
    [
        ("1.20", "Shutdown", "Node is shutting, evicting pods", None),
        ("1.25", "Terminated", SHUTDOWN_121, None),
        ("1.26", "Terminated", SHUTDOWN_121, "TerminationByKubelet"),
        ("1.20", "Preempting", "Preempted in order to admit critical pod", None),
        ("1.26", "Preempting", "Preempted in order to admit critical pod", "TerminationByKubelet"),
    ],
)
def test_the_kubelet_ending_a_running_pod_is_an_eviction_on_every_version(
    version, reason, message, condition
):
    """pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go and
    pkg/kubelet/preemption/preemption.go: phase Failed with the kubelet's reason; from
    1.26 (PodDisruptionConditions) a DisruptionTarget TerminationByKubelet as well."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-1")
    extra = {}
    if condition:
        extra["conditions"] = [cond("DisruptionTarget", "True", 200, condition, message)]
    status = failed_status(11, reason, message, hostIP="10.0.0.2", **extra)
    script.add(200, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", status))

    view = script.view("web-1", at=210)

    assert (view["verdict"], view["reason"]) == ("evicted", reason), version
    assert "look at the container" not in view["explanation"]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("1.25", "Pod Resources cannot be allocated with Topology locality"),
        ("1.26", "Pod was rejected: Resources cannot be allocated with Topology locality"),
    ],
)
def test_a_topology_manager_rejection_is_rejected_on_every_version(version, message):
    """pkg/kubelet/kubelet.go rejectPod ("Pod " + message ≤1.25, "Pod was rejected: "
    1.26+) with the topology manager's reason; the Warning event has no prefix."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("gpu", "u-gpu", 10, "worker-1", owner=None))
    event = core_event(
        "gpu",
        "u-gpu",
        "TopologyAffinityError",
        "Resources cannot be allocated with Topology locality",
        10,
        host="worker-1",
        type_="Warning",
    )
    script.add(10.2, "ADDED", event)
    status = failed_status(10, "TopologyAffinityError", message, qosClass="Guaranteed")
    script.add(10.3, "MODIFIED", pod("gpu", "u-gpu", 10, "worker-1", status, owner=None))

    view = script.view("gpu", at=20)

    assert (view["verdict"], view["reason"]) == ("rejected", "TopologyAffinityError"), version
    assert view["milestones"]["admitted"] is None
    assert "Pod Resources" not in view["explanation"]


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("1.25", "Pod The node had condition: [DiskPressure]. "),
        ("1.26", "Pod was rejected: The node had condition: [DiskPressure]. "),
    ],
)
def test_an_eviction_manager_admission_refusal_is_rejected_on_every_version(version, message):
    """pkg/kubelet/eviction/eviction_manager.go Admit: reason Evicted, "The node had
    condition: [X]. ", through rejectPod's prefix of the version."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("batch", "u-batch", 10, "worker-1", owner=None))
    status = failed_status(10, "Evicted", message)
    script.add(10.3, "MODIFIED", pod("batch", "u-batch", 10, "worker-1", status, owner=None))

    view = script.view("batch", at=20)

    assert (view["verdict"], view["reason"]) == ("rejected", "Evicted"), version


def test_a_node_pressure_eviction_of_a_running_pod_is_still_evicted():
    """pkg/kubelet/eviction/eviction_manager.go evictPod: "The node was low on resource"."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-1")
    message = "The node was low on resource: memory. Threshold quantity: 100Mi."
    script.add(
        200,
        "MODIFIED",
        pod("web-1", "u-web-1", 10, "worker-1", failed_status(11, "Evicted", message)),
    )

    assert (script.view("web-1", at=210)["verdict"]) == "evicted"


# ------------------------------------------------------------------ C5, P8


def test_a_scheduling_gated_pod_gets_gate_advice_not_capacity_advice():
    """pkg/scheduler/framework/plugins/schedulinggates (1.27 beta, 1.30 GA): PodScheduled
    False, reason SchedulingGated."""
    gated = {
        "phase": "Pending",
        "conditions": [
            cond(
                "PodScheduled",
                "False",
                10,
                "SchedulingGated",
                "Scheduling is blocked due to non-empty scheduling gates",
            )
        ],
    }
    script = Script().add(10.1, "ADDED", pod("job-1", "u-job", 10, status=gated))

    view = script.view("job-1", at=20)

    assert (view["verdict"], view["reason"]) == ("unscheduled", "SchedulingGated")
    assert "schedulingGates" in view["explanation"]
    assert "add capacity" not in view["explanation"]


def test_a_stale_disruption_target_reset_by_the_disruption_controller_is_forgotten():
    """pkg/controller/disruption/disruption.go (stalePodDisruptionTimeout, 1.26+): a
    DisruptionTarget whose pod was not deleted within 2 min goes back to False."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-1")
    status = running_status(11)
    marked = [
        *status["conditions"],
        cond("DisruptionTarget", "True", 100, "EvictionByEvictionAPI", "Eviction API: evicting"),
    ]
    script.add(
        100, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", {**status, "conditions": marked})
    )
    reset = [*status["conditions"], cond("DisruptionTarget", "False", 220, "", "")]
    script.add(
        220, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", {**status, "conditions": reset})
    )

    assert script.view("web-1", at=150)["verdict"] == "evicted"
    assert script.view("web-1", at=230)["verdict"] == "running"


# ------------------------------------------------------------------ P11, K6


def test_a_scheduler_preemption_victim_before_1_26_is_evicted():
    """pkg/scheduler/framework/preemption/preemption.go prepareCandidate (1.20:
    pkg/scheduler/core/generic_scheduler.go): a "Preempted" event on the victim and a
    graceful delete; the DisruptionTarget PreemptionByScheduler only from 1.26."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "batch-1", "u-batch", 10, "worker-1")
    preempted = core_event(
        "batch-1",
        "u-batch",
        "Preempted",
        "Preempted by default/critical-0 on node worker-1",
        200,
        "default-scheduler",
    )
    script.add(200.1, "ADDED", preempted)
    status = running_status(11)
    script.add(200.2, "MODIFIED", pod("batch-1", "u-batch", 10, "worker-1", status, 230))
    script.add(231, "DELETED", pod("batch-1", "u-batch", 10, "worker-1", status, 200))

    view = script.view("batch-1", at=240)

    assert (view["verdict"], view["reason"]) == ("evicted", "PreemptionByScheduler")


def test_a_pod_rejected_when_a_restarted_kubelet_readmits_it_is_explained_so():
    """pkg/kubelet/lifecycle/predicate.go: a kubelet restart admits every pod again; one
    that ran for days can fail (a label or allocatable change)."""
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    _running_on(script, "web-1", "u-web-1", 10, "worker-1")
    message = "Pod was rejected: Predicate NodeAffinity failed"
    script.add(
        9000,
        "MODIFIED",
        pod("web-1", "u-web-1", 10, "worker-1", failed_status(11, "NodeAffinity", message)),
    )

    view = script.view("web-1", at=9010)

    assert (view["verdict"], view["reason"]) == ("rejected", "NodeAffinity")
    assert "had been running this pod" in view["explanation"]
    assert "straight to Failed" not in view["explanation"]
