"""Fleet aggregates, computed on the server: the page gets distributions, a per-node
heatmap and a sample of stage bars, never the pod views themselves."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from handoff import verdicts as v
from handoff.durations import percentile
from handoff.trace import parse_time
from webui.detail.rows import PodRow

FLEET_DURATIONS = ("create_to_bind", "bind_to_ack", "ack_to_running", "create_to_running")
HEATMAP_LATENCY = ("bind_to_ack", "ack_to_running", "create_to_running")
# The handoff failures a node can be blamed for (unscheduled pods have no node).
FAILURES = (
    v.STUCK,
    v.PODGC_DELETED,
    v.REJECTED,
    v.NODE_LOST,
    v.EVICTED,
    v.AWAITING_KUBELET,
    v.FAILED,
)
SLO_SECONDS = 5.0  # sig-scalability pod startup SLO: p99 create→running ≤ 5 s
ECDF_POINTS = 400
BINS_PER_DECADE = 8
HEATMAP_NODES = 60
SWIMLANE_LIMIT = 10_000


def distribution(values: list[float]) -> dict[str, Any]:
    """Percentiles, a log-binned histogram and a down-sampled ECDF of one duration."""
    values = sorted(values)
    n = len(values)
    if not n:
        return {"count": 0, "p50": None, "p90": None, "p99": None, "histogram": None, "ecdf": None}
    return {
        "count": n,
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99),
        "max": values[-1],
        "histogram": histogram(values),
        "ecdf": ecdf(values),
    }


def histogram(values: list[float]) -> dict[str, list[float]]:
    """Counts in log-spaced bins (durations span milliseconds to hours). Zero, which a
    coarse one-second timestamp can give, goes in the first bin."""
    positive = [x for x in values if x > 0]
    low = math.floor(math.log10(positive[0])) if positive else -2
    high = math.ceil(math.log10(values[-1])) if positive else -1
    high = max(high, low + 1)
    bins = (high - low) * BINS_PER_DECADE
    edges = [10 ** (low + i / BINS_PER_DECADE) for i in range(bins + 1)]
    counts = [0] * bins
    for x in values:
        index = 0 if x <= edges[0] else int((math.log10(x) - low) * BINS_PER_DECADE)
        counts[min(max(index, 0), bins - 1)] += 1
    return {"edges": [round(e, 6) for e in edges], "counts": counts}


def ecdf(values: list[float]) -> dict[str, list[float]]:
    """The empirical CDF at up to ECDF_POINTS evenly spaced fractions."""
    n = len(values)
    steps = min(n, ECDF_POINTS)
    xs, ys = [], []
    for i in range(1, steps + 1):
        rank = math.ceil(i * n / steps)
        xs.append(values[rank - 1])
        ys.append(round(rank / n, 6))
    return {"x": xs, "y": ys}


def fleet_digest(
    rows: Iterable[PodRow], evaluated_at: str | None, swimlane_limit: int = SWIMLANE_LIMIT
) -> dict[str, Any]:
    """Everything the fleet page draws, from one pass over the pods."""
    samples: dict[str, list[float]] = {name: [] for name in FLEET_DURATIONS}
    per_node_failures: dict[str, Counter[str]] = {}
    per_node_latency: dict[str, dict[str, list[float]]] = {}
    per_node_pods: Counter[str] = Counter()
    verdicts: Counter[str] = Counter()
    recent: list[PodRow] = []
    total = 0
    for row in rows:
        total += 1
        verdicts[row.verdict] += 1
        for name in FLEET_DURATIONS:
            value = row.durations.get(name)
            if value is not None:
                samples[name].append(value)
        if row.node:
            per_node_pods[row.node] += 1
            if row.verdict in FAILURES:
                per_node_failures.setdefault(row.node, Counter())[row.verdict] += 1
            latency = per_node_latency.setdefault(row.node, {d: [] for d in HEATMAP_LATENCY})
            for name in HEATMAP_LATENCY:
                value = row.durations.get(name)
                if value is not None:
                    latency[name].append(value)
        recent.append(row)
    return {
        "evaluated_at": evaluated_at,
        "pods": total,
        "verdicts": {name: verdicts.get(name, 0) for name in v.VERDICT_NAMES},
        "slo_seconds": SLO_SECONDS,
        "durations": {name: distribution(samples[name]) for name in FLEET_DURATIONS},
        "heatmap": heatmap(per_node_pods, per_node_failures, per_node_latency),
        "swimlane": swimlane(recent, swimlane_limit),
    }


def heatmap(
    pods: Counter[str],
    failures: dict[str, Counter[str]],
    latency: dict[str, dict[str, list[float]]],
) -> dict[str, Any]:
    """Rows: the nodes with the most handoff failures (then the most pods)."""
    ranked = sorted(pods, key=lambda node: (-sum(failures.get(node, {}).values()), -pods[node]))
    nodes = ranked[:HEATMAP_NODES]
    return {
        "nodes": nodes,
        "more_nodes": max(0, len(ranked) - len(nodes)),
        "pods": [pods[node] for node in nodes],
        "failures": list(FAILURES),
        "counts": [[failures.get(node, Counter())[f] for f in FAILURES] for node in nodes],
        "latency": list(HEATMAP_LATENCY),
        "p90": [
            [_p90(latency.get(node, {}).get(name, [])) for name in HEATMAP_LATENCY]
            for node in nodes
        ],
    }


def _p90(values: list[float]) -> float | None:
    return percentile(sorted(values), 0.90) if values else None


def swimlane(rows: list[PodRow], limit: int) -> dict[str, Any]:
    """Stage bars of the ``limit`` most recently created pods, one lane each, as compact
    columns (milliseconds since ``base``) the page turns into WebGL line segments."""
    rows.sort(key=lambda row: (row.created, row.namespace, row.name))
    chosen = rows[-limit:] if limit else []
    lanes = []
    bars: dict[str, list[list[int]]] = {}
    times = []
    parsed: list[list[tuple[str, float, float]]] = []
    for row in chosen:
        pod_bars = []
        for bar in row.stage_bars():
            start, end = parse_time(bar["start"]), parse_time(bar["end"])
            pod_bars.append((bar["name"], start, end))
            times.append(start)
        parsed.append(pod_bars)
    base = min(times) if times else 0.0
    for lane, (row, pod_bars) in enumerate(zip(chosen, parsed, strict=True)):
        lanes.append([row.namespace, row.name, row.uid, row.verdict])
        for name, start, end in pod_bars:
            bars.setdefault(name, []).append(
                [lane, round((start - base) * 1000), round((end - base) * 1000)]
            )
    return {
        "base_ms": round(base * 1000),
        "lanes": lanes,
        "bars": bars,
        "left_out": len(rows) - len(chosen),
    }
