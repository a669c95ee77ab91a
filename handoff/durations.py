"""Handoff durations and their percentiles, as clusterloader2's PodStartupLatency
reports them (p50/p90/p99 per duration)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from handoff.verdicts import DURATIONS, MILESTONES

_INDEX = {name: index for index, name in enumerate(MILESTONES)}
_PAIRS = tuple((name, _INDEX[start], _INDEX[end]) for name, start, end in DURATIONS)


def durations(milestones: Sequence[float | None]) -> dict[str, float | None]:
    """Seconds between milestone pairs; None when either end is unknown.

    Object timestamps have 1-second precision, so a pair mixing an object time
    with a watch time can come out slightly negative: it is clamped to 0.
    """
    result: dict[str, float | None] = {}
    for name, start, end in _PAIRS:
        a, b = milestones[start], milestones[end]
        result[name] = None if a is None or b is None else round(max(0.0, b - a), 6)
    return result


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarise(samples: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """{duration: {p50, p90, p99, count}} with None percentiles when there is no sample."""
    summary: dict[str, dict[str, Any]] = {}
    for name, _start, _end in DURATIONS:
        values = sorted(samples.get(name, ()))
        if values:
            summary[name] = {
                "p50": percentile(values, 0.50),
                "p90": percentile(values, 0.90),
                "p99": percentile(values, 0.99),
                "count": len(values),
            }
        else:
            summary[name] = {"p50": None, "p90": None, "p99": None, "count": 0}
    return summary
