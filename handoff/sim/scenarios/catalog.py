"""The named scenarios: each builds a cluster and scripts what happens in it, in virtual
seconds. See docs/simulator.md for what each one shows and the verdicts it should produce.
"""

from __future__ import annotations

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.objects import Obj
from handoff.sim.scenarios.base import Options, Scenario
from handoff.sim.scenarios.demo import LEAD, demo
from handoff.sim.scenarios.fidelity import DURATION_S, fidelity
from handoff.sim.scenarios.manifests import (
    CONTROL_PLANE_IMAGES,
    NGINX,
    container,
    control_plane,
    coredns,
    kindnet,
    pod_spec,
    simple_pod,
)
from handoff.sim.scenarios.scale import scale
from handoff.sim.scenarios.steady import steady

# --- manual-scheduling (seed 003) ----------------------------------------------------------


def manual_scheduling(opts: Options) -> Cluster:
    cluster = Cluster(opts.cluster_config("sim-manual-scheduling"))
    control_plane(cluster)
    cluster.add_node(
        "worker-1",
        taints=[{"key": "dedicated", "value": "reports", "effect": "NoSchedule"}],
        images=CONTROL_PLANE_IMAGES,
    )
    cluster.add_node("worker-2", images=CONTROL_PLANE_IMAGES)
    at = cluster.at
    for name in ("control-plane", "worker-1", "worker-2"):
        at(0.5, kindnet, cluster, name)
    at(1.0, coredns, cluster)
    # A pod the scheduler places: its Scheduled event is the proof.
    at(5.0, cluster.create_pod, simple_pod("plain"))
    # Pinned: no scheduler, kubelet on worker-2 takes it directly.
    at(6.0, cluster.create_pod, simple_pod("pinned", node_name="worker-2", cpu="100m"))
    # The scheduler refuses the NoSchedule-tainted node ...
    at(
        8.0,
        cluster.create_pod,
        simple_pod("tainted", node_selector={"kubernetes.io/hostname": "worker-1"}),
    )
    # ... but a nodeName pod bypasses NoSchedule and runs there.
    at(9.0, cluster.create_pod, simple_pod("pinned-tainted", node_name="worker-1"))
    web = pod_spec([container("nginx", NGINX, cpu="250m", memory="64Mi")], node_name="worker-2")
    at(
        12.0,
        cluster.deployments.apply,
        "default",
        "web",
        {"metadata": {"labels": {"app": "web"}}, "spec": web},
        3,
    )
    # Kubelet admission rejections: straight to Failed, never retried.
    at(30.0, cluster.create_pod, simple_pod("bigcpu", node_name="worker-2", cpu="100"))
    at(
        31.0,
        cluster.create_pod,
        simple_pod("badsel", node_name="worker-2", node_selector={"disktype": "ssd"}),
    )
    at(32.0, cluster.create_pod, simple_pod("bigmem", node_name="worker-2", memory="100Gi"))
    # A typo'd node name: nobody watches it; PodGC deletes it 40-80 s later, no events.
    at(40.0, cluster.create_pod, simple_pod("ghost3", node_name="worker-3"))
    # Deleting a mirror pod: the kubelet brings it back.
    at(60.0, cluster.delete_pod, "kube-system", "kube-scheduler-control-plane")
    # A NoExecute taint evicts the pinned pod that does not tolerate it.
    at(90.0, cluster.taint, "worker-1", "maintenance", "true", "NoExecute")
    return cluster


# --- handoff-failures (seed 000) -----------------------------------------------------------


def handoff_failures(opts: Options) -> Cluster:
    cluster = Cluster(ClusterConfig(name="sim-handoff-failures", seed=opts.seed, start=opts.start))
    control_plane(cluster)
    for i in range(1, 6):
        cluster.add_node(f"worker-{i}", images=CONTROL_PLANE_IMAGES)
    at = cluster.at
    at(1.0, coredns, cluster)

    def on(node: str) -> dict[str, str]:
        return {"kubernetes.io/hostname": node}

    # A pod already running on worker-3, and one on worker-5.
    at(2.0, cluster.create_pod, simple_pod("victim", cpu="200m", node_selector=on("worker-3")))
    at(3.0, cluster.create_pod, simple_pod("leftover", cpu="200m", node_selector=on("worker-5")))
    # Stale binding: worker-4's kubelet hangs (its heartbeats go on), the pod stays Pending.
    at(5.0, cluster.fault, "worker-4", "hang")
    at(10.0, cluster.create_pod, simple_pod("stale", cpu="100m", node_selector=on("worker-4")))
    # Node death right after binding: worker-3 dies the moment its kubelet would pick it up.
    at(14.9, cluster.fault, "worker-3", "die-on-pickup")
    at(15.0, cluster.create_pod, simple_pod("doomed", cpu="100m", node_selector=on("worker-3")))
    # The cloud controller removes the dead machine's Node; PodGC then cleans up.
    at(420.0, cluster.delete_node, "worker-3")

    # Admission rejection after node state changed since the scheduler's decision: while the
    # binding is in flight (a slow API call), a pinned pod takes the CPU on worker-2.
    def race(assumed: Obj, node_name: str) -> float | None:
        if assumed["metadata"]["name"] != "racer":
            return None
        cluster.create_pod(simple_pod("hog", node_name=node_name, cpu="2500m"))
        return 0.25

    cluster.scheduler.on_assume.append(race)
    at(30.0, cluster.create_pod, simple_pod("racer", cpu="2500m", node_selector=on("worker-2")))
    # An orphan: worker-5's Node object is deleted under a running pod.
    at(60.0, cluster.fault, "worker-5", "die")
    at(60.0, cluster.delete_node, "worker-5")
    return cluster


# --- owners ---------------------------------------------------------------------------------


def owners(opts: Options) -> Cluster:
    """Workloads as one incident each: a Deployment in a namespace whose ResourceQuota is
    used up (its ReplicaSet's FailedCreate, repeated at the work queue's back-off) and a
    Deployment pinned to a node that does not exist (created, PodGC-deleted, created...)."""
    cluster = Cluster(opts.cluster_config("sim-owners"))
    control_plane(cluster)
    cluster.add_node("worker-1", images=CONTROL_PLANE_IMAGES)
    cluster.add_node("worker-2", images=CONTROL_PLANE_IMAGES)
    at = cluster.at
    for name in ("control-plane", "worker-1", "worker-2"):
        at(0.5, kindnet, cluster, name)
    at(1.0, coredns, cluster)
    cluster.api.set_pod_quota("team", "team-pods", 2)
    api = pod_spec([container("api", NGINX, cpu="100m", memory="64Mi")])
    at(5.0, cluster.deployments.apply, "team", "api", _template("api", api), 4)
    pinned = pod_spec([container("batch", NGINX, cpu="100m")], node_name="worker-9")
    at(10.0, cluster.deployments.apply, "default", "pinned", _template("pinned", pinned), 1)
    return cluster


def _template(app: str, spec: Obj) -> Obj:
    return {"metadata": {"labels": {"app": app}}, "spec": spec}


SCENARIOS: dict[str, Scenario] = {}


def register(scenario: Scenario) -> None:
    SCENARIOS[scenario.name] = scenario


register(
    Scenario(
        "manual-scheduling",
        manual_scheduling,
        180.0,
        "every case of seed 003: pinned, NoSchedule bypassed, rejections, typo, "
        "Deployment with nodeName, static/mirror pods, NoExecute eviction",
        attachable=True,
    )
)
register(
    Scenario(
        "handoff-failures",
        handoff_failures,
        540.0,
        "seed 000's failure modes: node death after binding, hung kubelet, admission race, orphan",
    )
)


register(
    Scenario(
        "fidelity",
        fidelity,
        DURATION_S,
        "95 s of the seed situations, for manage.py fidelity: scheduled, pinned, "
        "FailedScheduling, rejections, a graceful delete, a Deployment, PodGC of a typo, "
        "a node lost under a pod (NoExecute eviction), a node deleted under one (PodGC)",
        attachable=True,
    )
)


register(
    Scenario(
        "steady",
        steady,
        None,
        "a healthy cluster with rollouts, jobs, scaling and a few percent of failures",
        attachable=True,
    )
)


register(
    Scenario(
        "owners",
        owners,
        360.0,
        "a Deployment starved by a ResourceQuota (FailedCreate) and one pinned to a missing "
        "node (a PodGC loop): owner rows and loops",
    )
)


register(
    Scenario(
        "scale",
        scale,
        300.0,
        "--nodes/--pods already running (up to 5,000/150,000), --churn pods/s turned over",
    )
)


register(
    Scenario(
        "demo",
        demo,
        None,
        "steady's churn plus a handoff incident every 7-12 minutes: every attention verdict "
        "within the first minute (what `make demo` serves)",
        lead=LEAD,
    )
)
