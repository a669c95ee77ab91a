"""The replay board's pod list from the shared judging pass is the one rows give."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.core import verdicts as v
from handoff.core.trace import TraceReader
from handoff.core.views import sort_key
from handoff.offline.replay import ReplayState
from webui.detail.sources import PodFilters, ReplaySource

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def _from_rows(source: ReplaySource, filters: PodFilters, offset: int, limit: int) -> dict:
    """The list as every pod's row made it before the shared pass."""
    wanted = [row for row in source.rows() if filters.matches(row)]
    wanted.sort(key=lambda r: (-v.severity(r.verdict), r.created or "9999", r.namespace, r.name))
    page = wanted[offset : offset + limit]
    views = [source.view(source.timeline.pods[row.uid]) for row in page]
    views.sort(key=sort_key)
    end = offset + len(page)
    return {
        "evaluated_at": source.evaluated_at,
        "total": len(wanted),
        "pods": views,
        "next": str(end) if end < len(wanted) else None,
    }


@pytest.mark.parametrize(
    "filters",
    [
        PodFilters(),
        PodFilters(verdicts=frozenset({"running", "node-lost"})),
        PodFilters(namespace="default"),
        PodFilters(node="worker-3"),
        PodFilters(node=""),
        PodFilters(binding="scheduler"),
        PodFilters(q="WEB"),
    ],
)
def test_the_pod_list_is_the_rows_list(filters: PodFilters) -> None:
    events = [e for trace in sorted(TRACES.glob("*.jsonl")) for e in TraceReader(trace)]
    state = ReplayState(events, every=50)
    times = sorted(state.times)
    for at in (times[len(times) // 4], times[len(times) // 2], times[-1]):
        for offset, limit in ((0, 100), (0, 3), (2, 5)):
            with ReplaySource(state, at, 60.0) as source:
                assert source.pods(filters, offset, limit) == _from_rows(
                    source, filters, offset, limit
                )
