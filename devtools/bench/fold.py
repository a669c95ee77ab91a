"""The fold beside its baselines: the orjson parse floor, the kubernetes client's typed
deserialisation, memory per pod and a whole offline triage."""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import orjson

from devtools.bench.results import Figure, Results
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader, open_binary

TYPED_MODELS = {
    ("v1", "Pod"): "V1Pod",
    ("v1", "Node"): "V1Node",
    ("v1", "Event"): "CoreV1Event",
    ("events.k8s.io/v1", "Event"): "EventsV1Event",
}


def _scale_argv(nodes: int, pods: int, churn: float, duration: float) -> list[str]:
    return [
        sys.executable,
        "manage.py",
        "simulate",
        "--scenario",
        "scale",
        "--nodes",
        str(nodes),
        "--pods",
        str(pods),
        "--churn",
        str(churn),
        "--duration",
        str(duration),
    ]


def record_scale_trace(out: Path, nodes: int, pods: int, churn: float, duration: float) -> float:
    """Run the simulator's ``scale`` scenario into ``out``; returns wall seconds."""
    start = time.perf_counter()
    argv = [*_scale_argv(nodes, pods, churn, duration), "--record", str(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def simulate_without_recording(
    nodes: int, pods: int, churn: float, duration: float
) -> tuple[int, float]:
    """The ``scale`` scenario flat out with nothing written: (watch events the API server's
    fan-out delivered, seconds of the run loop), as ``simulate`` reports them."""
    out = subprocess.run(
        [*_scale_argv(nodes, pods, churn, duration), "--speed", "max"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    found = re.search(r"in ([\d.]+) s wall, \d+ trace lines .*?, (\d+) API changes", out)
    if found is None:
        raise RuntimeError(f"unexpected simulate output: {out[-500:]}")
    return int(found.group(2)), float(found.group(1))


def count_lines(path: Path) -> int:
    with open_binary(path) as stream:
        return sum(1 for _ in stream)


def parse_floor(path: Path) -> float:
    """Seconds to read and orjson-parse every line: nothing can fold faster."""
    start = time.perf_counter()
    with open_binary(path) as stream:
        for line in stream:
            orjson.loads(line)
    return time.perf_counter() - start


def fold_seconds(path: Path) -> tuple[float, int]:
    """Seconds to read and fold the whole trace, and the pods it held."""
    gc.collect()
    start = time.perf_counter()
    timeline = fold(TraceReader(path))
    seconds = time.perf_counter() - start
    pods = len(timeline.pods)
    del timeline
    gc.collect()
    return seconds, pods


class _Response:
    """What ``ApiClient.deserialize`` reads: the raw body in ``data``."""

    def __init__(self, data: bytes) -> None:
        self.data = data


def typed_seconds(path: Path, limit: int) -> tuple[float, int, int]:
    """The naive approach: the kubernetes client's typed models for each object,
    as ``watch.stream`` without ``_preload_content=False`` does."""
    from kubernetes.client import ApiClient

    client = ApiClient()
    done = refused = 0
    start = time.perf_counter()
    with open_binary(path) as stream:
        for line in stream:
            record = json.loads(line)
            obj = record.get("object") if isinstance(record, dict) else None
            if not isinstance(obj, dict):
                continue
            model = TYPED_MODELS.get((obj.get("apiVersion"), obj.get("kind")))
            if model is not None:
                try:
                    client.deserialize(_Response(json.dumps(obj)), model)
                except ValueError:
                    refused += 1  # the typed models reject objects missing "required" fields
            done += 1
            if done >= limit:
                break
    return time.perf_counter() - start, done, refused


def memory_per_pod(path: Path, max_lines: int) -> tuple[float, int]:
    """Bytes the folded state holds per pod (tracemalloc over a sample)."""
    gc.collect()
    tracemalloc.start()
    reader = TraceReader(path)
    timeline = fold(line for number, line in enumerate(reader) if number < max_lines)
    held, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    pods = max(1, len(timeline.pods))
    return held / pods, pods


def triage_run(path: Path) -> tuple[float, float]:
    """``manage.py triage --format json`` of the whole trace: seconds, peak RSS in MiB."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "triage", "--trace", str(path), "--format", "json"],
        stdout=subprocess.DEVNULL,
    )
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"triage exited with {proc.returncode}")
    return seconds, usage.ru_maxrss / 1024


def run_fold_benchmarks(results: Results, trace: Path, typed_limit: int, memory_lines: int) -> None:
    lines = count_lines(trace)
    results.trace.update({"path": str(trace), "lines": lines, "bytes": trace.stat().st_size})
    floor = parse_floor(trace)
    folded, pods = fold_seconds(trace)
    results.trace["pods"] = pods
    typed, typed_lines, refused = typed_seconds(trace, typed_limit)
    fold_rate, floor_rate, typed_rate = lines / folded, lines / floor, typed_lines / typed
    results.add(
        Figure(
            "fold: read + fold",
            round(fold_rate),
            "events/s",
            "orjson parse floor",
            round(floor_rate),
            round(folded / floor, 2),
            "≥ 100k events/s; within 2x of the parse floor",
            fold_rate >= 100_000 and folded / floor <= 2,
            f"{1e6 * folded / lines:.1f} µs/event over {lines} events",
        )
    )
    results.add(
        Figure(
            "fold vs typed client",
            round(fold_rate),
            "events/s",
            "kubernetes client typed models",
            round(typed_rate),
            round(fold_rate / typed_rate, 1),
            "≥ 8x the typed client",
            fold_rate / typed_rate >= 8,
            f"typed baseline over the first {typed_lines} events"
            + (f" ({refused} objects refused by the typed models)" if refused else ""),
        )
    )
    per_pod, sample_pods = memory_per_pod(trace, memory_lines)
    results.add(
        Figure(
            "fold memory per pod",
            round(per_pod),
            "bytes",
            target="about 1 KB (≤ 1.25 KB)",
            met=per_pod <= 1280,
            note=f"tracemalloc over {sample_pods} pods",
        )
    )
    seconds, rss = triage_run(trace)
    per_million = seconds * 1_000_000 / lines
    results.add(
        Figure(
            "offline triage of the trace",
            round(seconds, 1),
            "s",
            target="1M events ≤ 20 s",
            met=per_million <= 20,
            note=f"{lines} events ({per_million:.0f} s per 1M events), peak RSS {rss:.0f} MiB",
        )
    )
