"""Fleet aggregates, computed on the server: the page gets distributions, a per-node
heatmap and a sample of stage bars, never the pod views themselves."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from handoff.core import verdicts as v
from handoff.core.durations import percentile
from handoff.core.histogram import PER_DECADE, Histogram, at_ranks
from handoff.core.trace import observed_time, parse_time
from handoff.live.pages.rows import PodRow
from handoff.live.queries import NODE_DURATIONS

FLEET_DURATIONS = ("create_to_bind", "bind_to_ack", "ack_to_running", "create_to_running")
HEATMAP_LATENCY = NODE_DURATIONS  # the fold keeps these per node
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
# The swimlane's bars name their stage by its place here (``swimlane``).
STAGE_NAMES = tuple(stage.name for stage in v.STAGES)
STAGE_PLACE = {name: place for place, name in enumerate(STAGE_NAMES)}


def _empty(unobserved: int) -> dict[str, Any]:
    return {
        "count": 0,
        "not_observed": unobserved,
        "p50": None,
        "p90": None,
        "p99": None,
        "histogram": None,
        "ecdf": None,
    }


def distribution(values: list[float], unobserved: int = 0) -> dict[str, Any]:
    """Percentiles, a log-binned histogram and a down-sampled ECDF of one duration, over
    the ``count`` pods it was measured for; ``not_observed`` pods reached its end unseen."""
    values = sorted(values)
    n = len(values)
    if not n:
        return _empty(unobserved)
    kept = Histogram.of_sorted(values)
    return {
        "count": n,
        "not_observed": unobserved,
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99),
        "max": values[-1],
        "histogram": histogram(kept),
        "ecdf": ecdf(values),
    }


def kept_distribution(kept: Histogram) -> dict[str, Any]:
    """``distribution`` from a kept histogram: counts exact; percentiles, max and the
    ECDF's x within ``histogram.RELATIVE_ERROR``; the binned histogram the same."""
    n = kept.count
    if not n:
        return _empty(kept.unobserved)
    ranked = kept.ranked()
    p50, p90, p99 = at_ranks(ranked, [max(1, math.ceil(f * n)) for f in (0.5, 0.9, 0.99)])
    ranks = _ecdf_ranks(n)
    return {
        "count": n,
        "not_observed": kept.unobserved,
        "p50": p50,
        "p90": p90,
        "p99": p99,
        "max": ranked[-1][0],
        "histogram": histogram(kept),
        "ecdf": {"x": at_ranks(ranked, ranks), "y": [round(r / n, 6) for r in ranks]},
    }


def histogram(kept: Histogram) -> dict[str, list[float]]:
    """Counts in log-spaced bins (durations span milliseconds to hours), from decade to
    decade around the values: three kept buckets a bin. Zero, which a coarse one-second
    timestamp can give, goes in the first bin."""
    low_bucket, high_bucket = kept.low_bucket(), kept.high_bucket()
    low = low_bucket // PER_DECADE if low_bucket is not None else -2
    high = high_bucket // PER_DECADE + 1 if high_bucket is not None else -1
    high = max(high, low + 1)
    bins = (high - low) * BINS_PER_DECADE
    edges = [10 ** (low + i / BINS_PER_DECADE) for i in range(bins + 1)]
    counts = [0] * bins
    counts[0] += kept.zero
    step = PER_DECADE // BINS_PER_DECADE
    for k, count in kept.buckets.items():
        counts[min(max((k - low * PER_DECADE) // step, 0), bins - 1)] += count
    return {"edges": [round(e, 6) for e in edges], "counts": counts}


def _ecdf_ranks(n: int) -> list[int]:
    steps = min(n, ECDF_POINTS)
    return [math.ceil(i * n / steps) for i in range(1, steps + 1)]


def ecdf(values: list[float]) -> dict[str, list[float]]:
    """The empirical CDF at up to ECDF_POINTS evenly spaced fractions."""
    n = len(values)
    ranks = _ecdf_ranks(n)
    return {"x": [values[r - 1] for r in ranks], "y": [round(r / n, 6) for r in ranks]}


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
        return self.answer(evaluated_at, [_lane(row) for row in chosen])

    def answer(self, evaluated_at: str | None, lanes: list[list[Any]]) -> dict[str, Any]:
        """The page's data, with the swimlane's ``lanes`` (``_lane`` of each chosen pod,
        oldest first) given: ``result``'s, or a replay's made without rows."""
        return self.answer_with(evaluated_at, swimlane(lanes, self.total - len(lanes)))

    def answer_with(self, evaluated_at: str | None, lanes: dict[str, Any]) -> dict[str, Any]:
        """``answer`` with the swimlane's part already made (``swimlane``'s answer): the
        replay builds it straight from its pods' bars."""
        nodes, more = rank_nodes(self.pods, self.failures)
        p90 = {
            node: {name: _p90(self.latency.get(node, {}).get(name, [])) for name in HEATMAP_LATENCY}
            for node in nodes
        }
        return {
            "evaluated_at": evaluated_at,
            "pods": self.total,
            "verdicts": {name: self.verdicts.get(name, 0) for name in v.VERDICT_NAMES},
            "slo_seconds": SLO_SECONDS,
            "durations": {
                name: distribution(self.samples[name], self.unobserved[name])
                for name in FLEET_DURATIONS
            },
            "heatmap": heatmap(self.pods, self.failures, p90, nodes, more),
            "swimlane": lanes,
        }


def kept_fleet(
    kept: dict[str, Any],
    node_histograms: Callable[[list[str]], dict[str, dict[str, Histogram]]],
) -> dict[str, Any]:
    """The fleet page from what the fold keeps (``queries.fleet_kept``), never from
    every pod: the same answer as ``fleet_digest`` over every stored view, with the
    percentiles read from kept histograms (within ``histogram.RELATIVE_ERROR``)."""
    pods: Counter[str] = Counter()
    failures: dict[str, Counter[str]] = {}
    for node, counts in kept["handed"].items():
        pods[node] = sum(counts.values())
        failed = Counter({f: counts[f] for f in FAILURES if counts.get(f)})
        if failed:
            failures[node] = failed
    nodes, more = rank_nodes(pods, failures)
    hists = node_histograms(nodes)
    p90 = {
        node: {name: hists[node][name].quantile(0.9) for name in HEATMAP_LATENCY} for node in nodes
    }
    durations = kept["durations"]
    lanes = kept["lanes"]
    return {
        "evaluated_at": kept["evaluated_at"],
        "pods": kept["pods"],
        "verdicts": {name: kept["verdicts"].get(name, 0) for name in v.VERDICT_NAMES},
        "slo_seconds": SLO_SECONDS,
        "durations": {
            name: kept_distribution(durations.get(name) or Histogram()) for name in FLEET_DURATIONS
        },
        "heatmap": heatmap(pods, failures, p90, nodes, more),
        "swimlane": swimlane(lanes, kept["pods"] - len(lanes)),
    }


def fleet_digest(
    rows: Iterable[PodRow], evaluated_at: str | None, swimlane_limit: int = SWIMLANE_LIMIT
) -> dict[str, Any]:
    """Everything the fleet page draws, from one pass over the pods."""
    fleet = Fleet(swimlane_limit)
    for row in rows:
        fleet.add(row)
    return fleet.result(evaluated_at)


def rank_nodes(pods: Counter[str], failures: dict[str, Counter[str]]) -> tuple[list[str], int]:
    """The heatmap's rows: the nodes with the most handoff failures, then the most pods,
    then by name; and how many nodes are left out."""
    ranked = sorted(
        pods, key=lambda node: (-sum(failures.get(node, {}).values()), -pods[node], node)
    )
    return ranked[:HEATMAP_NODES], max(0, len(ranked) - HEATMAP_NODES)


def heatmap(
    pods: Counter[str],
    failures: dict[str, Counter[str]],
    p90: dict[str, dict[str, float | None]],
    nodes: list[str],
    more: int,
) -> dict[str, Any]:
    """The heatmaps of the ranked ``nodes``: failures by kind, p90 latencies."""
    return {
        "nodes": nodes,
        "more_nodes": more,
        "pods": [pods[node] for node in nodes],
        "failures": list(FAILURES),
        "counts": [[failures.get(node, Counter())[f] for f in FAILURES] for node in nodes],
        "latency": list(HEATMAP_LATENCY),
        "p90": [[p90[node][name] for name in HEATMAP_LATENCY] for node in nodes],
    }


def _p90(values: list[float]) -> float | None:
    return percentile(sorted(values), 0.90) if values else None


def _lane(row: PodRow) -> list[Any]:
    """A row as the fold keeps a swimlane entry (``aggregates.lane``)."""
    bars: list[Any] = []
    for bar in row.stage_bars():
        bars += [bar["name"], round(_time(bar["start"]) * 1000), round(_time(bar["end"]) * 1000)]
    return [row.namespace, row.name, row.uid, row.verdict, bars]


def swimlane(chosen: list[list[Any]], left_out: int) -> dict[str, Any]:
    """Stage bars of the chosen pods (the most recently created), one lane each, in ms,
    one flat row per lane, which the page turns into WebGL segments.
    ``chosen``: [namespace, name, uid, verdict, [stage, start ms, end ms, ...]] each.

    A lane's row holds, per bar, the stage's place in ``STAGE_NAMES``, its start and its
    length: the first bar's start is counted from ``base_ms``, each later one's from
    the end of the bar before it (negative where stages overlap). Most bars start where
    the one before ends, so a row is mostly small numbers and zeros, which pack to less
    than half of a [lane, start, end] triple per bar (docs/api.md)."""
    flats = [lane[4] for lane in chosen]
    base = min([min(flat[1::3]) for flat in flats if flat], default=0)
    rows: list[list[int]] = []
    for flat in flats:
        row: list[int] = []
        previous = base
        for stage_name, start, end in zip(flat[0::3], flat[1::3], flat[2::3], strict=True):
            row += (STAGE_PLACE[stage_name], start - previous, end - start)
            previous = end
        rows.append(row)
    lanes = [lane[:4] for lane in chosen]
    return {
        "base_ms": base,
        "stages": STAGE_NAMES,
        "lanes": lanes,
        "bars": rows,
        "left_out": left_out,
    }


def swimlane_bars(answer: dict[str, Any]) -> list[list[tuple[str, int, int]]]:
    """A ``swimlane`` answer's bars read back: per lane, (stage, start ms, end ms) each,
    in epoch ms, as fleet.js reads them."""
    base = answer["base_ms"]
    names = answer["stages"]
    lanes = []
    for row in answer["bars"]:
        bars = []
        previous = base
        for place, gap, length in zip(row[0::3], row[1::3], row[2::3], strict=True):
            start = previous + gap
            previous = start + length
            bars.append((names[place], start, previous))
        lanes.append(bars)
    return lanes


def _time(text: str) -> float:
    # The trace reader's parse, which caches each second: bars share their seconds.
    value = observed_time(text)
    return value if value is not None else parse_time(text)
