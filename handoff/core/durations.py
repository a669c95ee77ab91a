"""Handoff durations and their percentiles, as clusterloader2's PodStartupLatency
reports them (p50/p90/p99 per duration) — only from what was seen: a duration whose end
happened before the watch saw the pod, or that a 1-second timestamp cannot resolve, has
no figure and is counted as not observed (``measure``)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from handoff.core.verdicts import DURATIONS, MILESTONES

_INDEX = {name: index for index, name in enumerate(MILESTONES)}
_PAIRS = tuple((name, _INDEX[start], _INDEX[end]) for name, start, end in DURATIONS)
_CREATED = _INDEX["created"]


def durations(
    milestones: Sequence[float | None], coarse: int = 0, seen: float | None = None
) -> dict[str, float | None]:
    """Seconds between milestone pairs; None when either end is unknown or was not
    observed (``measure``). ``coarse``: bit per milestone dated by an object's own
    1-second timestamp; ``seen``: when the pod was first seen (``first_seen``)."""
    m = milestones
    created = m[_CREATED]
    figures: dict[str, float | None] = {}
    for name, start, end in _PAIRS:  # measure(), inlined: a view calls this for every pod
        a, b = m[start], m[end]
        value = None
        if (
            a is not None
            and b is not None
            and (
                seen is None
                or not (b <= seen or (a == seen and not coarse >> start & 1 and a != created))
            )
        ):
            seconds = b - a
            if seconds >= 0.0 and not (seconds < 1.0 and (coarse >> start | coarse >> end) & 1):
                value = round(seconds, 6)
        figures[name] = value
    return figures


def measure(
    m: Sequence[float | None], start: int, end: int, coarse: int, seen: float | None
) -> float | None:
    """One duration, only from what was seen (issue 21): None when

    - either end is unknown;
    - the end had happened when the pod was first seen (a pod already bound or running
      when the watch listed it, or in a `kubectl get` snapshot): its time is at best an
      object's 1-second timestamp from before anyone watched;
    - the start was stamped with the moment the pod was first seen because the object
      gave no earlier time (a binding at creation is the creation time by definition);
    - the end is before the start (a 1-second object timestamp truncated below a
      microsecond one, or events seen out of order): not 0, unknown;
    - it is under a second and an end is a 1-second object timestamp: 0 and 0.9 s are
      the same figure at that precision.
    """
    a, b = m[start], m[end]
    if a is None or b is None:
        return None
    if seen is not None:
        if b <= seen:
            return None
        if a == seen and not coarse >> start & 1 and a != m[_CREATED]:
            return None
    seconds = b - a
    if seconds < 0.0:
        return None
    if seconds < 1.0 and (coarse >> start | coarse >> end) & 1:
        return None
    return round(seconds, 6)


def first_seen(pod: Any) -> float | None:
    """When the Pod object was first seen: its first recorded change (the oldest change is
    always kept), None for a pod known only from its events."""
    changes = pod.changes
    return changes[0] if changes else None


def pod_durations(pod: Any) -> dict[str, float | None]:
    """``durations`` of a folded pod (``timeline.PodState``)."""
    return durations(pod.milestones, pod.coarse, first_seen(pod))


def pod_duration(pod: Any, name: str) -> float | None:
    """One of ``pod_durations``, alone (the terminal table shows one)."""
    start, end = _ENDS[name]
    return measure(pod.milestones, start, end, pod.coarse, first_seen(pod))


_ENDS = {name: (start, end) for name, start, end in _PAIRS}


def not_observed(
    milestones: Sequence[float | None] | Mapping[str, Any], values: Mapping[str, float | None]
) -> list[str]:
    """The durations whose end happened but which have no figure: not observed (as
    opposed to not reached yet). ``milestones`` by position or by name (a view's)."""
    ends = (
        milestones
        if isinstance(milestones, Mapping)
        else dict(zip(MILESTONES, milestones, strict=True))
    )
    return [
        name
        for name, _start, end in DURATIONS
        if ends.get(end) is not None and values.get(name) is None
    ]


def new_samples() -> dict[str, array[float]]:
    """Empty samples per duration, for ``add_samples``: 8 bytes a value, not a float object."""
    return {name: array("d") for name, _start, _end in DURATIONS}


def add_samples(
    pod: Any, samples: dict[str, array[float]], unobserved: dict[str, int] | None = None
) -> None:
    """Add one folded pod's durations (as ``pod_durations`` computes them) to the
    samples; count the ones that happened but were not observed in ``unobserved``.
    ``measure`` inlined: a report calls this for every pod."""
    m, coarse, seen = pod.milestones, pod.coarse, first_seen(pod)
    created = m[_CREATED]
    for name, start, end in _PAIRS:
        b = m[end]
        if b is None:  # not reached: no figure, and none missed
            continue
        a = m[start]
        value = None
        if a is not None and (
            seen is None
            or not (b <= seen or (a == seen and not coarse >> start & 1 and a != created))
        ):
            seconds = b - a
            if seconds >= 0.0 and not (seconds < 1.0 and (coarse >> start | coarse >> end) & 1):
                value = round(seconds, 6)
        if value is not None:
            samples[name].append(value)
        elif unobserved is not None:
            unobserved[name] = unobserved.get(name, 0) + 1


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return sorted_values[rank - 1]


def summarise(
    samples: Mapping[str, Sequence[float]], unobserved: Mapping[str, int] | None = None
) -> dict[str, dict[str, Any]]:
    """{duration: {p50, p90, p99, count, not_observed}}: percentiles over the ``count``
    pods measured (None without any); ``not_observed`` pods reached the end milestone
    but have no figure (``measure``) and are left out of the percentiles."""
    unobserved = unobserved or {}
    return {
        name: one_summary(sorted(samples.get(name, ())), unobserved.get(name, 0))
        for name, _start, _end in DURATIONS
    }


def one_summary(values: Sequence[float], not_observed: int) -> dict[str, Any]:
    """One duration's entry of ``summarise``: ``values`` in order (a sorted list, or any
    sequence whose ``percentile`` reads them in order)."""
    if not len(values):
        return {"p50": None, "p90": None, "p99": None, "count": 0, "not_observed": not_observed}
    return {
        "p50": percentile(values, 0.50),
        "p90": percentile(values, 0.90),
        "p99": percentile(values, 0.99),
        "count": len(values),
        "not_observed": not_observed,
    }
