"""The fold builds each swimlane entry from its own stage times in epoch seconds
(``aggregates.lane_of``), not by parsing the view's RFC 3339 text back (``lane``): the
entries and creation times must be the same bytes and floats, the sub-microsecond and
half-millisecond instants included (where rounding the float straight to milliseconds
would not give what the text gives)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from handoff.core.podstate import CREATED
from handoff.core.trace import format_time, observed_time, parse_time
from handoff.core.verdicts import STAGES
from handoff.core.views import pod_view, stage_bars, stage_dicts
from handoff.live.aggregates import as_written, created_of, lane, lane_of
from handoff.offline.triage import fold_file

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def _instants() -> list[float]:
    rng = random.Random(19)
    moments = [rng.uniform(0.0, 4.1e9) for _ in range(5_000)]
    # Half milliseconds, just under and over them, and fractions that round up to the
    # next whole second at the microsecond.
    moments += [round(rng.uniform(1.5e9, 1.9e9), 3) + 0.0004996 for _ in range(5_000)]
    moments += [round(rng.uniform(1.5e9, 1.9e9), 3) + 0.0005 for _ in range(5_000)]
    moments += [float(rng.randrange(1_500_000_000, 1_900_000_000)) + 0.9999996 for _ in range(500)]
    return moments


def test_an_instant_as_written_is_the_text_read_back() -> None:
    for moment in _instants():
        text = format_time(moment)
        assert as_written(moment) == parse_time(text), text
        assert round(as_written(moment) * 1000) == round(observed_time(text) * 1000), text


def test_a_lane_from_floats_is_the_lane_from_the_text() -> None:
    rng = random.Random(7)
    known: dict[float, int] = {}  # shared across lanes, as within a flush
    moments = sorted(_instants())
    for start in range(0, len(moments) - 8, 8):
        times = moments[start : start + 8]
        bars = [
            (stage.name, times[i], times[i + 1], rng.random() < 0.2)
            for i, stage in enumerate(STAGES[:7])
        ]
        view = {"namespace": "ns", "name": f"p{start}", "verdict": "running"}
        view["stages"] = stage_dicts(bars)
        assert lane_of(view, bars, known) == lane(view)


@pytest.mark.parametrize("trace", sorted(p.name for p in TRACES.glob("*.jsonl")))
def test_folded_pods_lanes_and_creation_times(trace: str) -> None:
    timeline, _ = fold_file(TRACES / trace)
    now = (timeline.last_observed or 0.0) + 12.3456789
    known: dict[float, int] = {}
    for pod in timeline.pods.values():
        bars = stage_bars(pod.milestones, now)
        view = pod_view(timeline, pod, now, bars=bars)
        assert view == pod_view(timeline, pod, now)
        assert lane_of(view, bars, known) == lane(view)
        created = pod.milestones[CREATED]
        assert (0.0 if created is None else as_written(created)) == created_of(view)
