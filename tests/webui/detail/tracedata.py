"""Traces for the detail pages' tests, folded into Redis through the real fold worker."""

from __future__ import annotations

from pathlib import Path

import orjson
import redis

from handoff.live import clusters, store
from handoff.live.fold import Folder, FoldSettings

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
HOSTILE = "<img src=x onerror=alert(1)>"


def hostile_trace(target: Path) -> Path:
    """rejected-outofcpu with the hostile string in an event's message and reason, a pod
    annotation, a node's taint and the kubelet's rejection message."""
    out = []
    for raw in (TRACES / "rejected-outofcpu.jsonl").read_bytes().splitlines():
        record = orjson.loads(raw)
        obj = record.get("object") or {}
        kind = obj.get("kind")
        if kind == "Pod":
            obj["metadata"].setdefault("annotations", {})["note"] = HOSTILE
            status = obj.get("status") or {}
            if status.get("message"):
                status["message"] += " " + HOSTILE
        elif kind == "Event":
            obj["message"] = obj["message"] + " " + HOSTILE
        elif kind == "Node" and obj["metadata"]["name"] == "worker-1":
            taints = obj["spec"].setdefault("taints", [])
            taints.append({"key": "team", "value": HOSTILE, "effect": "NoSchedule"})
        out.append(orjson.dumps(record))
        if kind == "Event":
            extra = orjson.loads(raw)
            extra["object"]["metadata"]["name"] += "x"
            extra["object"]["metadata"]["uid"] = "hostile-event-uid"
            extra["object"]["reason"] = "Hostile" + HOSTILE
            extra["object"]["message"] = HOSTILE
            extra["object"]["type"] = "Normal"
            # Five seconds later, so its marker stands apart from the rejection's.
            extra["observed"] = "2026-03-01T11:10:07.100000Z"
            for key in ("firstTimestamp", "lastTimestamp"):
                extra["object"][key] = "2026-03-01T11:10:07Z"
            out.append(orjson.dumps(extra))
    target.write_bytes(b"\n".join(out) + b"\n")
    return target


def fold_into_redis(client: redis.Redis, cluster: str, path: Path) -> Folder:
    """Register a trace cluster, put the trace's lines on its stream, run the fold worker's
    restore/step/flush in-process: the store then holds what a live fold would write."""
    clusters.register_cluster(client, clusters.ClusterConfig(name=cluster, kind="trace"))
    lines = [line for line in path.read_bytes().splitlines() if b'"handoff_trace"' not in line]
    store.append(client, cluster, lines)
    folder = Folder(client, cluster, FoldSettings(block_ms=1))
    folder.restore()
    while folder.step():
        pass
    folder.flush()
    return folder


def many_pods_trace(target: Path, count: int) -> Path:
    """``count`` copies of scheduled-running's pod (its nodes, each pod's four watch
    updates), with their own names, uids and nodes, observed 10 ms apart."""
    nodes, pod_lines = [], []
    for raw in (TRACES / "scheduled-running.jsonl").read_bytes().splitlines():
        record = orjson.loads(raw)
        kind = (record.get("object") or {}).get("kind")
        if kind == "Node":
            nodes.append(raw)
        elif kind == "Pod":
            pod_lines.append(record)
    template_uid = pod_lines[0]["object"]["metadata"]["uid"]
    out = [b'{"handoff_trace":1,"cluster":"many","source":"scripted"}', *nodes]
    for i in range(count):
        for step, record in enumerate(pod_lines):
            obj = orjson.loads(orjson.dumps(record["object"]))
            meta = obj["metadata"]
            meta["name"] = f"load-{i:05d}"
            meta["namespace"] = f"team-{i % 7}"
            meta["uid"] = template_uid[:-5] + f"{i:05d}"
            if obj["spec"].get("nodeName"):
                obj["spec"]["nodeName"] = ("worker-1", "worker-3")[i % 2]
            second, micros = divmod(i * 10_000 + step * 1000, 1_000_000)
            observed = f"2026-03-01T10:{1 + second // 60:02d}:{second % 60:02d}.{micros:06d}Z"
            out.append(orjson.dumps({"observed": observed, "type": record["type"], "object": obj}))
    target.write_bytes(b"\n".join(out) + b"\n")
    return target
