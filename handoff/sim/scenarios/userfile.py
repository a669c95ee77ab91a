"""User scenarios from a YAML file: nodes, workloads and faults at given times.

The format is documented in docs/simulator.md; handoff/sim/scenarios/examples/lab.yaml is
an example.
Problems are reported as ValueError with the path of the offending entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.objects import Obj
from handoff.sim.scenarios.base import Options, Scenario
from handoff.sim.scenarios.manifests import CONTROL_PLANE_IMAGES, control_plane

NODE_KEYS = {"name", "count", "first", "cpu", "memory", "pods", "labels", "taints", "images"}
FAULTS = {"hang", "stop", "die", "die-on-pickup", "resume", "not-ready", "memory-pressure"}


def scenario_from_file(path: str | Path) -> Scenario:
    text = Path(path).read_text()
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: the top level must be a mapping")
    name = str(doc.get("name") or Path(path).stem)
    validate(doc, str(path))

    def build(opts: Options) -> Cluster:
        return build_cluster(doc, name, opts)

    duration = doc.get("duration")
    return Scenario(
        name,
        build,
        float(duration) if duration is not None else 300.0,
        str(doc.get("description", "a user scenario")),
    )


def validate(doc: dict[str, Any], where: str) -> None:
    nodes = doc.get("nodes")
    if not isinstance(nodes, list) or not nodes:
        raise ValueError(f"{where}: 'nodes' must be a non-empty list")
    for i, node in enumerate(nodes):
        if not isinstance(node, dict) or "name" not in node:
            raise ValueError(f"{where}: nodes[{i}] needs a 'name'")
        unknown = set(node) - NODE_KEYS
        if unknown:
            raise ValueError(f"{where}: nodes[{i}]: unknown keys {sorted(unknown)}")
    for section in ("workloads", "faults"):
        for i, item in enumerate(doc.get(section) or ()):
            if not isinstance(item, dict) or "at" not in item:
                raise ValueError(f"{where}: {section}[{i}] needs 'at' (seconds)")
            kinds = set(item) & {"pod", "deployment", "job", "delete", "node", "mirror"}
            if len(kinds) != 1:
                raise ValueError(
                    f"{where}: {section}[{i}] needs exactly one of pod, deployment, job, "
                    "delete, node"
                )
            if "node" in item and item.get("action") not in (
                FAULTS | {"delete", "taint", "untaint", "cordon", "uncordon", "remove-static"}
            ):
                raise ValueError(f"{where}: {section}[{i}]: unknown action {item.get('action')!r}")


def build_cluster(doc: dict[str, Any], name: str, opts: Options) -> Cluster:
    settings = doc.get("cluster") or {}
    config = ClusterConfig(
        name=str(settings.get("name", f"sim-{name}")),
        seed=opts.seed,
        start=opts.start,
        node_monitor_grace=float(settings.get("node_monitor_grace", 40.0)),
        podgc_condition=bool(settings.get("podgc_condition", True)),
    )
    cluster = Cluster(config)
    if settings.get("control_plane", True):
        control_plane(cluster)
    for node in doc["nodes"]:
        count = int(node.get("count", 1))
        first = int(node.get("first", 1))
        for i in range(first, first + count):
            node_name = node["name"].format(i=i) if "{i}" in node["name"] else node["name"]
            cluster.add_node(
                node_name,
                cpu=str(node.get("cpu", "4")),
                memory=str(node.get("memory", "8Gi")),
                pods=int(node.get("pods", 110)),
                labels=node.get("labels"),
                taints=node.get("taints"),
                images=tuple(node.get("images", CONTROL_PLANE_IMAGES)),
            )
    for item in [*(doc.get("workloads") or ()), *(doc.get("faults") or ())]:
        cluster.at(float(item["at"]), apply_item, cluster, item)
    return cluster


def apply_item(cluster: Cluster, item: dict[str, Any]) -> None:
    if "pod" in item:
        cluster.create_pod(as_pod(item["pod"]))
    elif "deployment" in item:
        dep = item["deployment"]
        template = dep["template"]
        cluster.deployments.apply(
            dep.get("namespace", "default"), dep["name"], template, int(dep.get("replicas", 1))
        )
    elif "job" in item:
        job = item["job"]
        cluster.jobs.create(
            job.get("namespace", "default"),
            job["name"],
            job["template"],
            completions=int(job.get("completions", 1)),
            parallelism=int(job.get("parallelism", 1)),
            backoff_limit=int(job.get("backoffLimit", 6)),
        )
    elif "delete" in item:
        target = item["delete"]
        cluster.delete_pod(target.get("namespace", "default"), target["name"], target.get("grace"))
    elif "node" in item:
        node_fault(cluster, item)


def node_fault(cluster: Cluster, item: dict[str, Any]) -> None:
    node_name, action = item["node"], item["action"]
    if action in FAULTS:
        cluster.fault(node_name, action)
    elif action == "delete":
        cluster.delete_node(node_name)
    elif action == "taint":
        taint = item["taint"]
        cluster.taint(node_name, taint["key"], taint.get("value"), taint["effect"])
    elif action == "untaint":
        cluster.untaint(node_name, item["taint"]["key"])
    elif action == "remove-static":
        cluster.kubelets[node_name].remove_static(item["manifest"])
    else:
        cluster.cordon(node_name, action == "cordon")


def as_pod(manifest: Obj) -> Obj:
    """A Pod manifest as written for kubectl apply (apiVersion/kind optional)."""
    meta = dict(manifest.get("metadata") or {})
    meta.setdefault("namespace", "default")
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": manifest["spec"]}
