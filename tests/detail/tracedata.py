"""Traces for the detail pages' tests, folded into Redis through the real fold worker."""

from __future__ import annotations

from pathlib import Path

import orjson
import redis

from handoff import store
from handoff.ingest import Folder, FoldSettings

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
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
            out.append(orjson.dumps(extra))
    target.write_bytes(b"\n".join(out) + b"\n")
    return target


def fold_into_redis(client: redis.Redis, cluster: str, path: Path) -> Folder:
    """Register a trace cluster, put the trace's lines on its stream, run the fold worker's
    restore/step/flush in-process: the store then holds what a live fold would write."""
    store.register_cluster(client, store.ClusterConfig(name=cluster, kind="trace"))
    lines = [line for line in path.read_bytes().splitlines() if b'"handoff_trace"' not in line]
    store.append(client, cluster, lines)
    folder = Folder(client, cluster, FoldSettings(block_ms=1))
    folder.restore()
    while folder.step():
        pass
    folder.flush()
    return folder
