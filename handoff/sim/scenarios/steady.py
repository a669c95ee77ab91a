"""The ``steady`` scenario: a healthy cluster at work, the demo's default.

Deployments roll out new images now and then, jobs come and go, deployments scale, and a
few percent of what happens goes wrong the way it does in real clusters: a bad image tag,
a crash-looping release, a debug pod pinned to a misspelt node, an over-sized pinned pod,
a kubelet that hangs or stops for a while. Runs until stopped unless given a duration.
"""

from __future__ import annotations

from random import Random

from handoff.sim.cluster import Cluster
from handoff.sim.objects import Obj, container, pod, pod_spec
from handoff.sim.scenarios.base import Options
from handoff.sim.scenarios.manifests import CONTROL_PLANE_IMAGES, control_plane, coredns, kindnet

APPS = (
    # name, namespace, replicas, image, cpu, memory
    ("frontend", "shop", 4, "nginx", "100m", "64Mi"),
    ("api", "shop", 6, "ghcr.io/example/shop-api", "250m", "256Mi"),
    ("cart", "shop", 3, "ghcr.io/example/cart", "200m", "128Mi"),
    ("search", "shop", 3, "ghcr.io/example/search", "500m", "512Mi"),
    ("worker", "jobs", 4, "ghcr.io/example/worker", "300m", "256Mi"),
    ("redis", "shop", 1, "redis", "100m", "128Mi"),
)


class Steady:
    """The script: each ``_tick_*`` method is one kind of activity that reschedules itself."""

    def __init__(self, cluster: Cluster, workers: int, churn: float) -> None:
        self.cluster = cluster
        self.rng: Random = cluster.loop.rng
        self.workers = [f"worker-{i}" for i in range(1, workers + 1)]
        self.churn = churn
        self.versions = dict.fromkeys((a[0] for a in APPS), 1)
        self.broken: set[str] = set()
        self.serial = 0

    def start(self) -> None:
        at = self.cluster.at
        for name in ("control-plane", *self.workers):
            at(0.5, kindnet, self.cluster, name)
        at(1.0, coredns, self.cluster)
        for i, app in enumerate(APPS):
            at(2.0 + i, self._deploy, app[0])
        self._every((60.0, 240.0), self._rollout, first=90.0)
        self._every((10.0 / self.churn, 30.0 / self.churn), self._job, first=15.0)
        self._every((120.0, 300.0), self._scale, first=150.0)
        self._every((400.0, 900.0), self._mistake, first=200.0)
        self._every((1200.0, 3000.0), self._node_trouble, first=500.0)

    def _every(self, gap: tuple[float, float], fn: object, first: float) -> None:
        def tick() -> None:
            fn()  # type: ignore[operator]
            self.cluster.loop.call_later(self.cluster.loop.uniform(gap), tick)

        self.cluster.at(first, tick)

    # --- workloads -------------------------------------------------------------------------

    def _app(self, name: str) -> tuple[str, str, int, str, str, str]:
        return next(a for a in APPS if a[0] == name)

    def _template(self, name: str, image: str, crash: bool = False) -> Obj:
        _, _, _, _, cpu, memory = self._app(name)
        annotations = {"sim.handoff/crash": "5"} if crash else {}
        meta: Obj = {"labels": {"app": name}}
        if annotations:
            meta["annotations"] = annotations
        return {"metadata": meta, "spec": pod_spec([container(name, image, cpu, memory)])}

    def _image(self, name: str) -> str:
        base = self._app(name)[3]
        version = self.versions[name]
        if base in ("nginx", "redis"):
            return f"{base}:1.{26 + version % 3}.{version}"
        return f"{base}:v1.{version}.0"

    def _deploy(self, name: str, crash: bool = False, image: str | None = None) -> None:
        _, namespace, replicas, *_ = self._app(name)
        template = self._template(name, image or self._image(name), crash)
        self.cluster.deployments.apply(namespace, name, template, replicas)

    def _rollout(self) -> None:
        """A new release; now and then a bad tag or a crashing build, rolled back later."""
        name = self.rng.choice([a[0] for a in APPS])
        if name in self.broken:
            return
        self.versions[name] += 1
        roll = self.rng.random()
        if roll < 0.06:
            self.broken.add(name)
            base = self._app(name)[3]
            self._deploy(name, image=f"{base}:v1.{self.versions[name]}.0-nonexistent")
            self.cluster.loop.call_later(self.cluster.loop.uniform((90, 240)), self._fix, name)
        elif roll < 0.10:
            self.broken.add(name)
            self._deploy(name, crash=True)
            self.cluster.loop.call_later(self.cluster.loop.uniform((120, 300)), self._fix, name)
        else:
            self._deploy(name)

    def _fix(self, name: str) -> None:
        self.broken.discard(name)
        self.versions[name] += 1
        self._deploy(name)

    def _scale(self) -> None:
        name = self.rng.choice([a[0] for a in APPS])
        if name in self.broken:
            return
        _, namespace, replicas, *_ = self._app(name)
        dep = self.cluster.deployments.deployments.get((namespace, name))
        if dep is None:
            return
        target = max(1, min(replicas * 2, dep.replicas + self.rng.choice((-2, -1, 1, 2))))
        self.cluster.deployments.apply(namespace, name, dep.template, target)

    def _job(self) -> None:
        self.serial += 1
        run_for = self.rng.uniform(5, 45)
        failing = self.rng.random() < 0.03
        annotations = {"sim.handoff/run-seconds": f"{run_for:.1f}"}
        if failing:
            annotations["sim.handoff/exit-code"] = "1"
        spec = pod_spec(
            [container("report", "ghcr.io/example/report:v3.2.1", "200m", "128Mi")],
            restart_policy="Never",
        )
        template = {"metadata": {"annotations": annotations}, "spec": spec}
        self.cluster.jobs.create(
            "batch",
            f"report-{self.serial:05d}",
            template,
            backoff_limit=1,
            ttl_after_finished=120.0,
        )

    # --- the few percent that go wrong -----------------------------------------------------

    def _mistake(self) -> None:
        """Someone pins a debug pod by hand: to a typo'd node, or asking for too much."""
        self.serial += 1
        target = self.rng.choice(self.workers)
        kind = self.rng.choice(("typo", "typo", "bigcpu", "pinned"))
        if kind == "typo":
            node_name = target.replace("worker-", "wroker-")
            cpu = None
        else:
            node_name = target
            cpu = "64" if kind == "bigcpu" else "50m"
        spec = pod_spec([container("debug", "busybox:1.36", cpu)], node_name=node_name)
        name = f"debug-{self.serial:04d}"
        self.cluster.create_pod(pod(name, "default", spec, labels={"run": name}))
        if kind == "pinned":
            self.cluster.loop.call_later(300.0, self.cluster.delete_pod, "default", name)
        elif kind == "bigcpu":
            self.cluster.loop.call_later(600.0, self.cluster.delete_pod, "default", name)

    def _node_trouble(self) -> None:
        """A kubelet hangs for a while, stops or reports NotReady long enough for NotReady
        taints and evictions, or runs short of memory and evicts a pod."""
        name = self.rng.choice(self.workers)
        kubelet = self.cluster.kubelets[name]
        if kubelet.state != "running" or kubelet.not_ready or kubelet.memory_pressure:
            return
        mode = self.rng.choice(
            ("hang", "hang", "hang", "stop", "hang", "hang", "stop", "not-ready", "memory-pressure")
        )
        self.cluster.fault(name, mode)
        if mode == "memory-pressure":
            return  # it clears itself once a pod is evicted
        lasting = self.rng.uniform(60, 200) if mode == "hang" else self.rng.uniform(90, 400)
        self.cluster.loop.call_later(lasting, self.cluster.fault, name, "resume")


def steady(opts: Options) -> Cluster:
    cluster = Cluster(opts.cluster_config("sim-steady"))
    control_plane(cluster)
    workers = opts.nodes or 6
    images = (*CONTROL_PLANE_IMAGES, "busybox:1.36")
    for i in range(1, workers + 1):
        cluster.add_node(f"worker-{i}", cpu="8", memory="16Gi", images=images)
    Steady(cluster, workers, opts.churn or 1.0).start()
    return cluster
