"""A pod view's fast paths against the plain forms they stand in for.

``views.iso`` reads instants from a dict that starts again when full, instead of an
``lru_cache``; ``durations.durations`` has ``measure`` inlined. Each must give exactly
what the plain form gives: the triage JSON, the API and the pod page show them.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from handoff.core import views
from handoff.core.durations import _PAIRS, durations, measure
from handoff.core.trace import format_time
from handoff.core.verdicts import MILESTONES

# Instants around 2026, on whole seconds, halves and microseconds: ties and order both.
_INSTANT = st.one_of(
    st.none(),
    st.integers(0, 8).map(lambda n: 1_767_225_600.0 + n / 2),
    st.floats(1_767_225_600.0, 1_767_225_610.0, allow_nan=False),
)


@settings(max_examples=600, deadline=None)
@given(
    milestones=st.lists(_INSTANT, min_size=len(MILESTONES), max_size=len(MILESTONES)),
    coarse=st.integers(0, (1 << len(MILESTONES)) - 1),
    seen=_INSTANT,
)
def test_durations_are_measure_of_every_pair(
    milestones: list[float | None], coarse: int, seen: float | None
) -> None:
    expected = {name: measure(milestones, start, end, coarse, seen) for name, start, end in _PAIRS}
    assert durations(milestones, coarse, seen) == expected
    assert list(durations(milestones, coarse, seen)) == [name for name, _s, _e in _PAIRS]


def test_iso_is_format_time_across_a_full_cache() -> None:
    """More instants than the cache keeps, then the first ones again: every answer is
    ``format_time``'s, before and after the cache starts again."""
    base = 1_767_225_600.0
    instants = [base + n * 0.000_731 for n in range(views._INSTANTS_KEPT + 500)]
    for moment in instants + instants[:100]:
        assert views.iso(moment) == format_time(moment)
    assert views.iso(None) is None
    assert views.iso(base) == "2026-01-01T00:00:00.000000Z"
