"""``Histogram.of_sorted`` (bucket boundaries by binary search) counts exactly what
``add`` counts value by value, edges and clamped ends included."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from handoff.core.histogram import HIGHEST, OFFSET, PER_DECADE, Histogram


def one_by_one(values: list[float]) -> Histogram:
    kept = Histogram()
    for value in values:
        kept.add(value)
    return kept


def same(values: list[float]) -> None:
    values = sorted(values)
    want, got = one_by_one(values), Histogram.of_sorted(values)
    assert (got.zero, got.buckets) == (want.zero, want.buckets)


def test_values_on_and_beside_every_edge() -> None:
    """A value exactly on 10 ** (k / 24), and the floats either side of it, go where the
    logarithm puts them, however the edge rounds."""
    values = [0.0, 0.0]
    for k in range(-60, 150):
        edge = 10 ** (k / PER_DECADE)
        values += [math.nextafter(edge, 0.0), edge, math.nextafter(edge, math.inf)]
    same(values)


def test_the_clamped_ends_and_a_single_bucket() -> None:
    same([1e-300, 1e-250, 10 ** (-OFFSET / PER_DECADE) * 1.5, 1e-3])
    same([10 ** (HIGHEST / PER_DECADE) * 2, 1e300, 1e308, 5.0])
    same([2.0] * 50)
    same([])
    same([0.0] * 7)


def test_durations_as_a_fleet_has_them() -> None:
    rng = random.Random(19)
    values = [round(rng.lognormvariate(0.0, 2.0), 6) for _ in range(20_000)]
    values += [0.0] * 30 + [round(rng.uniform(0, 1e-6), 6) for _ in range(30)]
    same(values)


@given(st.lists(st.floats(min_value=0.0, max_value=1e12, allow_nan=False), max_size=200))
def test_any_durations(values: list[float]) -> None:
    same(values)
