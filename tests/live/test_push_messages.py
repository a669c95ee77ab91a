"""What one flush pushes to every browser of a cluster: board rows, or a refresh hint."""

from __future__ import annotations

import io

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader
from handoff.live.push import MAX_ROWS, ROW_FIELDS, board_row, messages
from tests.hardening.test_hostile_traces import TRACES


def _views() -> list[dict]:
    data = (TRACES / "rejected-outofcpu.jsonl").read_bytes()
    return build_report(fold(TraceReader(io.BytesIO(data))))["pods"]


def test_a_small_flush_sends_board_rows_and_the_counts() -> None:
    views = _views()
    counts = {"rejected": 1, "running": 3}
    [message] = messages("1-0", views, ["gone-uid"], "2026-11-29T22:00:00Z", counts)
    data = message["data"]
    assert message["type"] == "cluster.update"
    assert data["refresh"] is False
    assert data["changed"] == len(views) + 1
    assert data["removed"] == ["gone-uid"]
    assert data["counts"] == counts
    assert [row["uid"] for row in data["pods"]] == [view["uid"] for view in views]
    for row, view in zip(data["pods"], views, strict=True):
        assert set(row) == {*ROW_FIELDS, "milestones"}
        assert row["verdict"] == view["verdict"]
        assert row["milestones"]["created"] == view["milestones"]["created"]
        assert "events" not in row


def test_a_burst_becomes_one_refresh_hint() -> None:
    view = _views()[0]
    burst = [dict(view, uid=f"u{n}") for n in range(MAX_ROWS + 1)]
    [message] = messages("9-0", burst, [], "2026-11-29T22:00:00Z")
    data = message["data"]
    assert data["refresh"] is True
    assert data["changed"] == MAX_ROWS + 1
    assert data["pods"] == []
    assert data["cursor"] == "9-0"
    assert "counts" not in data


def test_rows_are_a_small_part_of_the_view() -> None:
    import orjson

    view = max(_views(), key=lambda v: len(orjson.dumps(v)))
    assert len(orjson.dumps(board_row(view))) * 2 < len(orjson.dumps(view))
