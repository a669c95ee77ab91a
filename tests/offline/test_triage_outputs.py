"""``manage.py triage`` prints what it printed before its speed work, byte for byte
(issue 19 item 7): tables and JSON of the scripted traces and of simulator recordings,
with --verdict, --at and --stuck-after; and the table's rows made without whole pod views
equal the ones made from them."""

from __future__ import annotations

import json
import random

import pytest

from handoff.core.report import build_report, build_rows
from handoff.core.trace import format_time, parse_time
from handoff.interop.exporters.tables import _epoch, render_table
from handoff.offline.triage import fold_file
from tests.offline import triage_outputs as outputs


@pytest.mark.slow  # some seventy manage.py processes
def test_every_output_is_the_one_kept() -> None:
    expected = json.loads(outputs.DIGESTS.read_text())
    found = outputs.outputs(outputs.BASE_DIR)

    assert sorted(found) == sorted(expected)
    assert {case for case in found if found[case] != expected[case]} == set()


@pytest.mark.parametrize(
    "trace", [*outputs.scripted(), *(f"triage/{name}" for name in outputs.RECORDED)]
)
@pytest.mark.parametrize("colour", [False, True])
def test_the_table_from_rows_is_the_table_from_views(trace: str, colour: bool) -> None:
    timeline, reader = fold_file(outputs.DATA / trace)
    for at in (None, (timeline.last_observed or 0.0) - 30.0):
        whole = build_report(timeline, at=at, errors=reader.errors)
        rows = build_rows(timeline, at=at, errors=reader.errors)

        assert render_table(rows, colour=colour) == render_table(whole, colour=colour)
        assert {key: value for key, value in rows.items() if key != "pods"} == {
            key: value for key, value in whole.items() if key != "pods"
        }


def test_the_tables_reading_of_times_is_parse_time() -> None:
    rng = random.Random(19)
    texts = [format_time(rng.uniform(0.0, 4.1e9)) for _ in range(20_000)]
    texts += ["2026-03-01T10:00:00+01:00", "2026-03-01T10:00:00.5Z", "2026-03-01t10:00:00.000001z"]
    for text in texts:
        assert _epoch(text) == parse_time(text), text
