"""The ``scale`` scenario: the Kubernetes scalability envelope (5,000 nodes, 150,000 pods).

The cluster starts full: ``--pods`` pods already running across ``--nodes`` nodes, in
namespaces of at most 3,000 pods, as a watcher starting on a big cluster would list them.
Then ``--churn`` pods per second are created through the scheduler and as many old ones
deleted gracefully, the way clusterloader2's load test turns pods over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.objects import Obj, add_default_tolerations, container, pod, pod_spec, stamp
from handoff.sim.scheduler import SchedulerTimings

if TYPE_CHECKING:
    from handoff.sim.scenarios import Options

PODS_PER_NAMESPACE = 3000
IMAGE = "registry.k8s.io/pause:3.10"


def _running_status(node_ip: str, pod_ip: str, now: float, conditions: list[Obj]) -> Obj:
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": node_ip,
        "hostIPs": [{"ip": node_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": stamp(now),
        "containerStatuses": [
            {
                "name": "pause",
                "state": {"running": {"startedAt": stamp(now)}},
                "lastState": {},
                "ready": True,
                "restartCount": 0,
                "image": IMAGE,
                "imageID": "",
                "started": True,
            }
        ],
        "qosClass": "Burstable",
    }


class Churn:
    def __init__(self, cluster: Cluster, pods: int, churn: float) -> None:
        self.cluster = cluster
        self.rng = cluster.loop.rng
        self.churn = churn
        self.live: list[tuple[str, str]] = []
        self.namespaces = max(1, -(-pods // PODS_PER_NAMESPACE))
        self.spec = add_default_tolerations(
            pod_spec([container("pause", IMAGE, cpu="10m", memory="16Mi")])
        )
        self.serial = 0

    def populate(self, pods: int) -> None:
        """Pods that were running before the recording started, spread round-robin."""
        cluster = self.cluster
        kubelets = list(cluster.kubelets.values())
        now = cluster.now
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp(now)}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ]
        for i in range(pods):
            kubelet = kubelets[i % len(kubelets)]
            namespace = f"load-{i % self.namespaces:03d}"
            spec = dict(self.spec)
            spec["nodeName"] = kubelet.name
            body = pod(f"load-{i:06d}", namespace, spec, labels={"group": "load"})
            pod_ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            body["status"] = _running_status(kubelet.ip, pod_ip, now, conditions)
            created = cluster.api.create("pods", body)
            kubelet.adopt(created)
            self.live.append((namespace, created["metadata"]["name"]))

    def start(self) -> None:
        if self.churn > 0:
            self.cluster.loop.call_later(1.0, self._tick)

    def _tick(self) -> None:
        """One pod in, one pod out, at --churn per second."""
        self.serial += 1
        namespace = f"load-{self.serial % self.namespaces:03d}"
        body = pod("", namespace, self.spec, labels={"group": "churn"}, generate_name="churn-")
        created = self.cluster.create_pod(body)
        if self.live:
            index = self.rng.randrange(len(self.live))
            self.live[index], self.live[-1] = self.live[-1], self.live[index]
            self.cluster.delete_pod(*self.live.pop())
        if created is not None:
            self.live.append((namespace, created["metadata"]["name"]))
        self.cluster.loop.call_later(1.0 / self.churn, self._tick)


def scale(opts: Options) -> Cluster:
    nodes = opts.nodes or 100
    pods = opts.pods if opts.pods is not None else 3000
    config = ClusterConfig(
        name="sim-scale",
        seed=opts.seed,
        start=opts.start,
        # percentageOfNodesToScore is a real KubeSchedulerConfiguration knob; large clusters
        # lower it, and the simulator needs it to keep one core fast (minimum 100 nodes).
        scheduler=SchedulerTimings(percentage_of_nodes_to_score=1),
    )
    cluster = Cluster(config)
    for i in range(1, nodes + 1):
        cluster.add_node(f"node-{i:05d}", cpu="32", memory="128Gi", images=(IMAGE,))
    churn = Churn(cluster, pods, opts.churn if opts.churn is not None else 20.0)
    churn.populate(pods)
    churn.start()
    return cluster
