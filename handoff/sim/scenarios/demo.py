"""The ``demo`` scenario: ``steady``'s healthy churn plus a handoff incident every few
minutes, so `make demo` shows every verdict the board is for within its first minute.

Each incident is one of the simulator's mechanisms, never a verdict set by hand (Kubernetes
v1.20 behaviour, as modelled in ``handoff.sim.components``):

- a kubelet goes silent (hung, heartbeats on) under pods bound to it: ``awaiting-kubelet``,
  then ``stuck`` after 60 s, until the kubelet comes back;
- a debug pod's manifest names a misspelt node: the board counts down PodGC's deletion,
  then ``podgc-deleted`` (PodGC: 20 s period, 40 s quarantine);
- a pinned pod asks for more CPU than the node has: kubelet admission ``rejected`` OutOfcpu;
- a node dies the moment its kubelet picks a pod up: ``node-lost`` once the node lifecycle
  controller marks it Unknown (40 s grace); the cloud provider deletes the machine later
  and a replacement node joins;
- a node is tainted ``NoExecute`` for maintenance: its pods are ``evicted`` by the
  taint-eviction controller, and the taint is lifted later;
- a pod asks for a GPU node there is none of: ``unscheduled``.

The cluster has ``LEAD`` seconds of past when it is served (``Scenario.lead``): Handoff's
first list already finds the first incident under way, as it would in a real cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.objects import container, pod, pod_spec
from handoff.sim.scenarios.manifests import CONTROL_PLANE_IMAGES, control_plane, kindnet
from handoff.sim.scenarios.steady import Steady

if TYPE_CHECKING:
    from handoff.sim.scenarios.base import Options

# Virtual seconds the cluster has run when Handoff first lists it.
LEAD = 60.0
FIRST_INCIDENT = 8.0  # the first incident starts here (after the apps' first rollout)
INCIDENT_GAP = (420.0, 720.0)  # then one every 7 to 12 minutes
IMAGES = (*CONTROL_PLANE_IMAGES, "busybox:1.36")
# When each step of an incident happens, in seconds after the incident begins. The first
# incident's steps up to the lead are under way before the first list; the rest follow
# within its first minute.
SILENT_KUBELET = 0.0
FIRST_ON_SILENT = 2.0
NODE_DIES = 27.0
TYPO = 42.0
OVERSIZED = 55.0
UNSCHEDULABLE = 57.0
SECOND_ON_SILENT = 58.0
RETRIED_ON_SILENT = 4.0  # an operator deletes a pod the silent kubelet holds, to retry it
RETRY_GRACE = 10  # seconds; no kubelet finishes the deletion: it stays Terminating
DRAIN = 62.0
UNDRAIN = 180.0
KUBELET_BACK = 200.0
MACHINE_DELETED = 300.0
REPLACEMENT_JOINS = 330.0
PENDING_GIVEN_UP = 300.0


class Incidents:
    """One incident after another, each on nodes picked among the healthy workers."""

    def __init__(self, cluster: Cluster, steady: Steady) -> None:
        self.cluster = cluster
        self.steady = steady
        self.loop = cluster.loop
        self.rng = cluster.loop.rng
        self.serial = 0
        self.incidents = 0
        self.machines = len(steady.workers)

    def start(self) -> None:
        self.cluster.at(FIRST_INCIDENT, self.incident)

    def incident(self) -> None:
        """The first incident shows every kind of trouble at once; each later one has a
        single node in trouble (silent, dying or drained) besides the pod mistakes."""
        first = self.incidents == 0
        self.incidents += 1
        nodes = self._healthy_nodes(3)
        if len(nodes) == 3:
            later = self.loop.call_later
            troubles = (self._silent, self._dying, self._drained)
            chosen = self.rng.randrange(len(troubles))
            for i, (trouble, node) in enumerate(zip(troubles, nodes, strict=True)):
                if first or i == chosen:
                    trouble(node)
            later(TYPO, self._typo)
            later(OVERSIZED, self._oversized)
            later(UNSCHEDULABLE, self._unschedulable)
        self.loop.call_later(self.loop.uniform(INCIDENT_GAP), self.incident)

    def _healthy_nodes(self, count: int) -> list[str]:
        kubelets = self.cluster.kubelets
        nodes = self.cluster.api.nodes()
        healthy = [
            name
            for name in self.steady.workers
            if kubelets[name].state == "running"
            and not kubelets[name].not_ready
            and not kubelets[name].die_on_pickup
            and not (nodes.get(("", name)) or {}).get("spec", {}).get("taints")
        ]
        self.rng.shuffle(healthy)
        return healthy[:count]

    def _silent(self, node: str) -> None:
        """The kubelet hangs (its heartbeats go on) under a pod bound to it, and another
        a minute later; it comes back after a few minutes and starts them."""
        later = self.loop.call_later
        later(SILENT_KUBELET, self.cluster.fault, node, "hang")
        later(FIRST_ON_SILENT, self._pinned, "nightly-export", {"hostname": node}, "100m")
        later(FIRST_ON_SILENT, self._retried, node)
        later(SECOND_ON_SILENT, self._pinned, "cache-warmup", {"hostname": node}, "100m")
        later(KUBELET_BACK, self.cluster.fault, node, "resume")

    def _retried(self, node: str) -> None:
        """A pod on the silent node that someone deletes to get it retried: the graceful
        delete waits for a kubelet that does not answer (stuck-terminating until it is
        back, when it finishes the deletion)."""
        name = self._pinned("report-sync", {"hostname": node}, "100m")
        delay = RETRIED_ON_SILENT - FIRST_ON_SILENT
        self.loop.call_later(delay, self.cluster.delete_pod, "batch", name, RETRY_GRACE)

    def _dying(self, node: str) -> None:
        self.loop.call_later(NODE_DIES, self._dies_on_pickup, node)

    def _drained(self, node: str) -> None:
        """Maintenance by NoExecute taint: every pod that does not tolerate it is evicted."""
        later = self.loop.call_later
        later(DRAIN, self.cluster.taint, node, "maintenance", "kernel-upgrade", "NoExecute")
        later(UNDRAIN, self.cluster.untaint, node, "maintenance")

    def _name(self, base: str) -> str:
        self.serial += 1
        return f"{base}-{self.serial:04d}"

    def _create(self, base: str, namespace: str, cpu: str | None, **spec_fields: object) -> str:
        name = self._name(base)
        spec = pod_spec([container(base, "busybox:1.36", cpu)], **spec_fields)
        self.cluster.create_pod(pod(name, namespace, spec, labels={"run": name}))
        return name

    def _pinned(self, base: str, selector: dict[str, str], cpu: str) -> str:
        labels = {f"kubernetes.io/{k}": v for k, v in selector.items()}
        return self._create(base, "batch", cpu, node_selector=labels)

    def _dies_on_pickup(self, node_name: str) -> None:
        """The machine fails the moment its kubelet takes the next pod; it never comes
        back: the cloud provider deletes its Node, and a new machine joins later."""
        self.cluster.fault(node_name, "die-on-pickup")
        self._pinned("ingest", {"hostname": node_name}, "200m")
        self.loop.call_later(MACHINE_DELETED - NODE_DIES, self._replace, node_name)

    def _replace(self, node_name: str) -> None:
        self.cluster.delete_node(node_name)
        self.machines += 1
        new = f"worker-{self.machines}"
        gap = REPLACEMENT_JOINS - MACHINE_DELETED
        self.loop.call_later(gap, self._join, node_name, new)

    def _join(self, old: str, new: str) -> None:
        self.cluster.add_node(new, cpu="8", memory="16Gi", images=IMAGES)
        kindnet(self.cluster, new)
        workers = self.steady.workers
        workers[workers.index(old)] = new

    def _typo(self) -> None:
        """A debug pod whose manifest misspells its node: nobody ever runs it."""
        target = self.rng.choice(self.steady.workers)
        self._create("debug", "default", None, node_name=target.replace("worker-", "wroker-"))

    def _oversized(self) -> None:
        """Pinned by hand, asking for more CPU than the node has: admission refuses it."""
        target = self._healthy_nodes(1) or self.steady.workers[:1]
        self._create("reindex", "batch", "12", node_name=target[0])

    def _unschedulable(self) -> None:
        """A training job asks for a GPU node the cluster does not have; given up later."""
        name = self._create("train", "ml", "500m", node_selector={"accelerator": "nvidia-tesla-t4"})
        self.loop.call_later(PENDING_GIVEN_UP, self.cluster.delete_pod, "ml", name)


def demo(opts: Options) -> Cluster:
    cluster = Cluster(ClusterConfig(name="sim-demo", seed=opts.seed, start=opts.start))
    control_plane(cluster)
    workers = opts.nodes or 6
    for i in range(1, workers + 1):
        cluster.add_node(f"worker-{i}", cpu="8", memory="16Gi", images=IMAGES)
    steady = Steady(cluster, workers, opts.churn or 2.0)
    steady.start()
    Incidents(cluster, steady).start()
    return cluster
