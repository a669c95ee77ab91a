"""Handoff durations and their percentiles, as clusterloader2's PodStartupLatency
reports them (p50/p90/p99 per duration)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from handoff.core.verdicts import DURATIONS, MILESTONES

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
        if a is None or b is None:
            result[name] = None
        else:
            seconds = b - a
            result[name] = round(seconds if seconds > 0.0 else 0.0, 6)
    return result


def new_samples() -> dict[str, array[float]]:
    """Empty samples per duration, for ``add_samples``: 8 bytes a value, not a float object."""
    return {name: array("d") for name, _start, _end in DURATIONS}


def add_samples(milestones: Sequence[float | None], samples: dict[str, array[float]]) -> None:
    """Add one pod's durations (as ``durations`` computes them) to the samples."""
    for name, start, end in _PAIRS:
        a, b = milestones[start], milestones[end]
        if a is not None and b is not None:
            seconds = b - a
            samples[name].append(round(seconds if seconds > 0.0 else 0.0, 6))


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarise(samples: Mapping[str, Sequence[float]]) -> dict[str, dict[str, Any]]:
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
