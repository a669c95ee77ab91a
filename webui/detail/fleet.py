"""Fleet aggregates, computed on the server: the page gets distributions, a per-node
heatmap and a sample of stage bars, never the pod views themselves."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

from handoff.core import verdicts as v
from handoff.core.durations import percentile
from handoff.core.trace import observed_time, parse_time
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


def distribution(values: list[float], unobserved: int = 0) -> dict[str, Any]:
    """Percentiles, a log-binned histogram and a down-sampled ECDF of one duration, over
    the ``count`` pods it was measured for; ``not_observed`` pods reached its end unseen."""
    values = sorted(values)
    n = len(values)
    if not n:
        return {
            "count": 0,
            "not_observed": unobserved,
            "p50": None,
            "p90": None,
            "p99": None,
            "histogram": None,
            "ecdf": None,
        }
    return {
        "count": n,
        "not_observed": unobserved,
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


class Fleet:
    """The fleet aggregates, fed one pod at a time (``add``), so one pass over a
    cluster's pods can feed this and the nodes page's aggregates together."""

    def __init__(self, swimlane_limit: int = SWIMLANE_LIMIT) -> None:
        self.limit = swimlane_limit
        self.samples: dict[str, list[float]] = {name: [] for name in FLEET_DURATIONS}
        self.unobserved: Counter[str] = Counter()
        self.failures: dict[str, Counter[str]] = {}
        self.latency: dict[str, dict[str, list[float]]] = {}
        self.pods: Counter[str] = Counter()
        self.verdicts: Counter[str] = Counter()
        # The most recently created pods, as a min-heap on (created, arrival).
        self.recent: list[tuple[str, int, PodRow]] = []
        self.total = 0

    def add(self, row: PodRow) -> None:
        self.total += 1
        self.verdicts[row.verdict] += 1
        durations = row.durations
        for name in FLEET_DURATIONS:
            value = durations.get(name)
            if value is not None:
                self.samples[name].append(value)
        self.unobserved.update(row.unobserved)
        node = row.node
        if node:
            self.pods[node] += 1
            if row.verdict in FAILURES:
                self.failures.setdefault(node, Counter())[row.verdict] += 1
            latency = self.latency.get(node)
            if latency is None:
                latency = self.latency[node] = {d: [] for d in HEATMAP_LATENCY}
            for name in HEATMAP_LATENCY:
                value = durations.get(name)
                if value is not None:
                    latency[name].append(value)
        if self.limit:
            item = (row.created, self.total, row)
            if len(self.recent) < self.limit:
                heapq.heappush(self.recent, item)
            elif item > self.recent[0]:
                heapq.heapreplace(self.recent, item)

    def result(self, evaluated_at: str | None) -> dict[str, Any]:
        chosen = [row for _, _, row in sorted(self.recent, key=lambda i: i[:2])]
        return {
            "evaluated_at": evaluated_at,
            "pods": self.total,
            "verdicts": {name: self.verdicts.get(name, 0) for name in v.VERDICT_NAMES},
            "slo_seconds": SLO_SECONDS,
            "durations": {
                name: distribution(self.samples[name], self.unobserved[name])
                for name in FLEET_DURATIONS
            },
            "heatmap": heatmap(self.pods, self.failures, self.latency),
            "swimlane": swimlane(chosen, self.total - len(chosen)),
        }


def fleet_digest(
    rows: Iterable[PodRow], evaluated_at: str | None, swimlane_limit: int = SWIMLANE_LIMIT
) -> dict[str, Any]:
    """Everything the fleet page draws, from one pass over the pods."""
    fleet = Fleet(swimlane_limit)
    for row in rows:
        fleet.add(row)
    return fleet.result(evaluated_at)


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


def swimlane(chosen: list[PodRow], left_out: int) -> dict[str, Any]:
    """Stage bars of the chosen pods (the most recently created), one lane each, as
    compact columns (milliseconds since ``base``) the page turns into WebGL segments."""
    lanes = []
    bars: dict[str, list[list[int]]] = {}
    times = []
    parsed: list[list[tuple[str, float, float]]] = []
    for row in chosen:
        pod_bars = []
        for bar in row.stage_bars():
            start, end = _time(bar["start"]), _time(bar["end"])
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
    return {"base_ms": round(base * 1000), "lanes": lanes, "bars": bars, "left_out": left_out}


def _time(text: str) -> float:
    # The trace reader's parse, which caches each second: bars share their seconds.
    value = observed_time(text)
    return value if value is not None else parse_time(text)
