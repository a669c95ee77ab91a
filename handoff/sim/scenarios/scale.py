"""The ``scale`` scenario: the Kubernetes scalability envelope (5,000 nodes, 150,000 pods).

The cluster starts full: ``--pods`` pods already running across ``--nodes`` nodes, in
namespaces of at most 3,000 pods, as a watcher starting on a big cluster would list them.
Then ``--churn`` pods per second are created through the scheduler and as many old ones
deleted gracefully, the way clusterloader2's load test turns pods over.
"""

from __future__ import annotations

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.components.scheduler import SchedulerTimings
from handoff.sim.objects import (
    Obj,
    add_default_tolerations,
    container,
    new_uid,
    pod,
    pod_spec,
    stamp,
)
from handoff.sim.scenarios.base import Options

PODS_PER_NAMESPACE = 3000
IMAGE = "registry.k8s.io/pause:3.10"


def _container_statuses(now: float) -> list[Obj]:
    return [
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
    ]


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
        """Pods that were running before the simulation started, spread round-robin.

        They are restored into the API server without watch events and handed to the
        scheduler's cache and the kubelets directly, as informers starting on a running
        cluster learn them from their first list; the recording lists them too.
        """
        cluster = self.cluster
        api = cluster.api
        rng = cluster.loop.rng
        kubelets = list(cluster.kubelets.values())
        now = cluster.now
        created = stamp(now)
        conditions = [
            {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": created}
            for t in (
                "PodReadyToStartContainers",
                "Initialized",
                "Ready",
                "ContainersReady",
                "PodScheduled",
            )
        ]
        # Shared by every pod they fit: stored objects are never mutated in place.
        per_node = [({**self.spec, "nodeName": k.name}, [{"ip": k.ip}]) for k in kubelets]
        statuses = _container_statuses(now)
        labels = {"group": "load"}
        scheduler_adopt = cluster.scheduler.adopt
        live = self.live
        for i in range(pods):
            slot = i % len(kubelets)
            kubelet = kubelets[slot]
            spec, host_ips = per_node[slot]
            namespace = f"load-{i % self.namespaces:03d}"
            name = f"load-{i:06d}"
            pod_ip = f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"
            status = {
                "phase": "Running",
                "conditions": conditions,
                "hostIP": kubelet.ip,
                "hostIPs": host_ips,
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": created,
                "containerStatuses": statuses,
                "qosClass": "Burstable",
            }
            body = {
                "kind": "Pod",
                "apiVersion": "v1",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "uid": new_uid(rng),
                    "resourceVersion": "",
                    "creationTimestamp": created,
                    "labels": labels,
                },
                "spec": spec,
                "status": status,
            }
            api.restore("pods", body)
            scheduler_adopt(body)
            kubelet.adopt(body)
            live.append((namespace, name))

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
