"""Traces for the detail pages' tests, folded into Redis through the real fold worker."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import redis

from handoff.core.trace import parse_time
from handoff.live import clusters, store
from handoff.live.fold import Folder, FoldSettings

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"
HOSTILE = "<img src=x onerror=alert(1)>"


SECOND_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


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
    template_start = parse_time(pod_lines[0]["observed"])
    out = [b'{"handoff_trace":1,"cluster":"many","source":"scripted"}', *nodes]
    for i in range(count):
        # The objects' own times move with the pod's, so each pod is watched from its
        # creation (its durations are observed), however late in the trace it comes.
        # Whole seconds, so they stay inside the second they are observed in, as the API's.
        shift = int(parse_time(_observed(i, 0))) - int(template_start)
        for step, record in enumerate(pod_lines):
            obj = _shifted(orjson.loads(orjson.dumps(record["object"])), shift)
            meta = obj["metadata"]
            meta["name"] = f"load-{i:05d}"
            meta["namespace"] = f"team-{i % 7}"
            meta["uid"] = template_uid[:-5] + f"{i:05d}"
            if obj["spec"].get("nodeName"):
                obj["spec"]["nodeName"] = ("worker-1", "worker-3")[i % 2]
            observed = _observed(i, step)
            out.append(orjson.dumps({"observed": observed, "type": record["type"], "object": obj}))
    target.write_bytes(b"\n".join(out) + b"\n")
    return target


def _observed(pod: int, step: int) -> str:
    second, micros = divmod(pod * 10_000 + step * 1000, 1_000_000)
    return f"2026-03-01T10:{1 + second // 60:02d}:{second % 60:02d}.{micros:06d}Z"


def _shifted(value: Any, seconds: int) -> Any:
    """Every 1-second RFC 3339 time in an object moved by ``seconds`` (kept to seconds)."""
    if isinstance(value, dict):
        return {key: _shifted(item, seconds) for key, item in value.items()}
    if isinstance(value, list):
        return [_shifted(item, seconds) for item in value]
    if isinstance(value, str) and SECOND_TIME.match(value):
        moved = datetime.fromtimestamp(int(parse_time(value) + seconds), tz=UTC)
        return moved.strftime("%Y-%m-%dT%H:%M:%SZ")
    return value
