"""Mergeable duration histograms with fixed log buckets: what the live fold keeps per
cluster and per node instead of every pod's figures (issue 19).

Bucket ``k`` holds the durations in [10^(k/24), 10^((k+1)/24)) seconds: 24 a decade, a
ratio of 10^(1/24) ≈ 1.101 between edges. A quantile is the nearest-rank bucket's
geometric middle, so it is within ``RELATIVE_ERROR`` (10^(1/48) - 1, about 4.9 %) of the exact
nearest-rank value; a duration of exactly 0 has a bucket of its own and comes back exact.
Counts add and subtract, so a pod whose figure changes moves from one bucket to another
and a pod that goes is taken off: the histogram is always that of the pods stored.

A pod's part in every duration packs into one integer (``pack``): per duration 9 bits,
0 for no figure and no end yet, 1 for "not observed" (the end happened unseen, issue
21.5), 2 for zero, 3 + k + ``OFFSET`` for bucket k.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence

from handoff.core.verdicts import DURATIONS

PER_DECADE = 24
RELATIVE_ERROR = 10 ** (1 / (2 * PER_DECADE)) - 1  # ≈ 0.0492
NAMES: tuple[str, ...] = tuple(name for name, _start, _end in DURATIONS)
OFFSET = 200  # bucket -200: 5e-9 s, below the microsecond durations are rounded to
HIGHEST = 308  # bucket 308: 6e12 s; longer is counted there
BITS = 9
NONE, UNOBSERVED, ZERO = 0, 1, 2
UNOBSERVED_FIELD = "u"  # the hash field suffix of "not observed"
ZERO_FIELD = "z"


def bucket(seconds: float) -> int:
    """The bucket of a positive duration."""
    k = math.floor(math.log10(seconds) * PER_DECADE)
    return min(max(k, -OFFSET), HIGHEST)


def middle(k: int) -> float:
    """The value a quantile falling in bucket k reports: the bucket's geometric middle."""
    return 10 ** ((k + 0.5) / PER_DECADE)


def code(value: float | None, unobserved: bool) -> int:
    """One duration's part (see the module's docstring)."""
    if value is None:
        return UNOBSERVED if unobserved else NONE
    if value <= 0.0:
        return ZERO
    return 3 + bucket(value) + OFFSET


def pack(values: Mapping[str, float | None], unobserved: Sequence[str]) -> int:
    """A pod's part in every duration, as one integer (``code`` of each, inlined: the
    fold packs every view it writes)."""
    packed = 0
    log10, floor = math.log10, math.floor
    for shift, name in _SHIFTS:
        value = values.get(name)
        if value is None:
            if name in unobserved:
                packed |= UNOBSERVED << shift
        elif value <= 0.0:
            packed |= ZERO << shift
        else:
            k = min(max(floor(log10(value) * PER_DECADE), -OFFSET), HIGHEST)
            packed |= (3 + k + OFFSET) << shift
    return packed


_SHIFTS = tuple((place * BITS, name) for place, name in enumerate(NAMES))


def unpack(packed: int) -> dict[str, int]:
    """name -> code of a packed part (codes of NONE left out)."""
    mask = (1 << BITS) - 1
    out = {}
    for place, name in enumerate(NAMES):
        part = packed >> (place * BITS) & mask
        if part:
            out[name] = part
    return out


def field(name: str, part: int) -> str:
    """The hash field a duration's part counts in: ``name:k``, ``name:z``, ``name:u``."""
    if part == UNOBSERVED:
        return f"{name}:{UNOBSERVED_FIELD}"
    if part == ZERO:
        return f"{name}:{ZERO_FIELD}"
    return f"{name}:{part - 3 - OFFSET}"


class Histogram:
    """One duration's kept counts: per bucket, at zero, and not observed."""

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.zero = 0
        self.unobserved = 0

    def add_field(self, suffix: str, count: int) -> None:
        """Count a stored hash field's suffix (``field`` without the name)."""
        if suffix == UNOBSERVED_FIELD:
            self.unobserved += count
        elif suffix == ZERO_FIELD:
            self.zero += count
        else:
            k = int(suffix)
            self.buckets[k] = self.buckets.get(k, 0) + count

    def add(self, value: float) -> None:
        if value <= 0.0:
            self.zero += 1
        else:
            k = bucket(value)
            self.buckets[k] = self.buckets.get(k, 0) + 1

    @classmethod
    def of_sorted(cls, values: Sequence[float]) -> Histogram:
        """The histogram ``add`` makes of these ascending values, from the buckets'
        boundaries alone: a binary search for each bucket the values span (a few dozen),
        not a logarithm for each of 100,000s of values. Each boundary is found near
        ``10 ** (k / PER_DECADE)`` and settled with ``bucket`` itself, so floating-point
        rounding at an edge puts a value where ``add`` puts it."""
        kept = cls()
        end = len(values)
        low = bisect_right(values, 0.0)
        kept.zero = low
        while low < end:
            k = bucket(values[low])
            high = low + 1
            if k < HIGHEST:
                edge = bisect_left(values, 10 ** ((k + 1) / PER_DECADE), high, end)
                while edge > high and bucket(values[edge - 1]) > k:
                    edge -= 1
                while edge < end and bucket(values[edge]) <= k:
                    edge += 1
                high = edge
            else:
                high = end
            kept.buckets[k] = high - low
            low = high
        return kept

    @property
    def count(self) -> int:
        """Pods measured (not observed ones are not)."""
        return self.zero + sum(self.buckets.values())

    def ranked(self) -> list[tuple[float, int]]:
        """(value, count) in ascending order: zero, then each bucket's middle."""
        out = [(0.0, self.zero)] if self.zero else []
        out += [(middle(k), self.buckets[k]) for k in sorted(self.buckets) if self.buckets[k] > 0]
        return out

    def quantile(self, fraction: float) -> float | None:
        """Nearest-rank quantile, within RELATIVE_ERROR of the exact one."""
        if not self.count:
            return None
        return at_ranks(self.ranked(), [max(1, math.ceil(fraction * self.count))])[0]

    def high_bucket(self) -> int | None:
        """The bucket of the longest duration (None: none is above zero)."""
        kept = [k for k, n in self.buckets.items() if n > 0]
        return max(kept) if kept else None

    def low_bucket(self) -> int | None:
        kept = [k for k, n in self.buckets.items() if n > 0]
        return min(kept) if kept else None


def at_ranks(ranked: list[tuple[float, int]], ranks: list[int]) -> list[float]:
    """The values at these ascending 1-based ranks of ``ranked`` (value, count) pairs."""
    out = []
    pairs = iter(ranked)
    value, seen = 0.0, 0
    for rank in ranks:
        while seen < rank:
            pair = next(pairs, None)
            if pair is None:
                break
            value, seen = pair[0], seen + pair[1]
        out.append(value)
    return out
