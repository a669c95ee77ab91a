"""Hostile and broken trace input: a line-numbered error and the rest ingested, never a
crash, a hang or a silent wrong answer.

The reader and the fold are fed mutated copies of the scripted traces under
tests/data/traces (every field replaced by a value of another type, deleted, or given an
odd timestamp), plus the classic broken files: truncated gzip, invalid UTF-8, 10 MB lines,
deeply nested JSON, objects without metadata, unknown kinds.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader
from handoff.interop.exporters.tables import render_table

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
LINES = [
    line
    for path in sorted(TRACES.glob("*.jsonl"))
    for line in path.read_bytes().splitlines()
    if line.strip() and b'"handoff_trace"' not in line
]

ODD_TIMES = [
    "2026-11-29T22:00:00Z",
    "2026-11-29T22:00:00.123456789Z",
    "2026-11-29T23:00:00+01:00",
    "2026-11-29t22:00:00z",
    "2026-11-29 22:00:00",
    "2026-11-29",
    "29/11/2026 22:00",
    "",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00Z",
    "2026-13-45T99:99:99Z",
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(ODD_TIMES),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += _paths(child, (*prefix, index))
    return out


@st.composite
def mutated_line(draw: st.DrawFn) -> bytes:
    record = orjson.loads(draw(st.sampled_from(LINES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(record) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = record
        for step in path[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent[path[-1]] = draw(json_values)
    return orjson.dumps(record)


def triage(data: bytes) -> tuple[dict[str, Any], TraceReader]:
    reader = TraceReader(io.BytesIO(data))
    timeline = fold(reader)
    report = build_report(timeline, errors=reader.errors)
    render_table(report)
    orjson.dumps(report)
    return report, reader


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(mutated_line(), st.sampled_from(LINES)), min_size=1, max_size=12))
def test_mutated_objects_never_crash_the_reader_the_fold_or_the_report(lines: list[bytes]) -> None:
    _, reader = triage(b"\n".join(lines) + b"\n")
    for error in reader.errors:
        assert 1 <= error.line <= len(lines)
        assert error.message


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=60), min_size=1, max_size=8), st.sampled_from(LINES))
def test_garbage_lines_are_numbered_and_the_good_line_still_counts(
    junk: list[bytes], good: bytes
) -> None:
    junk = [j.replace(b"\n", b" ") for j in junk]
    data = b"\n".join([*junk, good]) + b"\n"
    _, reader = triage(data)
    events = list(TraceReader(io.BytesIO(data)))
    # The good line is read (or counted as a skipped kind, as a watch ERROR's Status is).
    assert (events and events[-1].line == len(junk) + 1) or sum(reader.skipped.values()) == 1
    assert all(e.line <= len(junk) for e in reader.errors)


def test_invalid_utf8_is_reported_with_its_line_and_the_rest_read() -> None:
    bad = LINES[0].replace(b'"name":"', b'"name":"\xff\xfe', 1)
    data = b"\n".join([LINES[0], bad, LINES[1]]) + b"\n"
    _, reader = triage(data)
    assert [e.line for e in reader.errors] == [2]
    assert [e.line for e in TraceReader(io.BytesIO(data))] == [1, 3]


def test_a_truncated_gzip_keeps_what_was_read_and_says_where_it_ended(tmp_path: Path) -> None:
    whole = gzip.compress(b"\n".join(LINES[:200]) + b"\n")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(whole[: len(whole) * 2 // 3])
    reader = TraceReader(path)
    events = list(reader)
    assert 0 < len(events) < 200
    assert reader.errors
    assert "ended early" in reader.errors[-1].message
    assert reader.errors[-1].line == reader.lines_read + 1


def test_a_10_mb_line_costs_only_itself_and_the_next_line_is_read() -> None:
    huge = b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":{"kind":"Pod","x":"'
    huge += b"a" * (10 * 1024 * 1024) + b'"}}'
    data = b"\n".join([huge, LINES[0]]) + b"\n"
    report, reader = triage(data)
    assert not reader.errors
    assert report["skipped"] == {"Pod without metadata": 1} or len(report["pods"]) <= 1
    assert [e.line for e in TraceReader(io.BytesIO(data))][-1] == 2


def test_deeply_nested_json_is_an_error_not_a_recursion_crash() -> None:
    deep = b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":'
    deep += b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"
    _, reader = triage(b"\n".join([deep, LINES[0]]) + b"\n")
    assert [e.line for e in reader.errors] == [1]


def test_objects_without_metadata_and_unknown_kinds() -> None:
    lines = [
        b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":{"kind":"Pod"}}',
        b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":{"kind":"Secret",'
        b'"data":{"token":"c2VjcmV0"}}}',
        b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":{}}',
        b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":{"kind":"Event"}}',
        b'{"observed":"2026-11-29T22:00:00.000000Z","type":"ADDED","object":{"kind":"Node"}}',
        LINES[0],
    ]
    report, reader = triage(b"\n".join(lines) + b"\n")
    assert reader.skipped["Secret"] == 1
    assert {"Pod without metadata", "Node without metadata"} <= set(report["skipped"])
    assert b"c2VjcmV0" not in orjson.dumps(report)
    assert all(1 <= e.line <= 5 for e in reader.errors)


def test_odd_observed_times_are_read_or_refused_never_misread() -> None:
    expected = {
        "2026-11-29T22:00:00Z": 1795989600.0,
        "2026-11-29T22:00:00.123456789Z": 1795989600.123456,
        "2026-11-29T23:00:00+01:00": 1795989600.0,
        "2026-11-29t22:00:00z": 1795989600.0,
        "2026-11-29 22:00:00": 1795989600.0,
    }
    for text in ODD_TIMES:
        record = orjson.loads(LINES[0])
        record["observed"] = text
        events = list(reader := TraceReader(io.BytesIO(orjson.dumps(record) + b"\n")))
        if text in expected:
            assert not reader.errors, text
            assert abs(events[0].time() - expected[text]) < 1e-6, text
        elif events:
            assert not reader.errors
            assert text.startswith(("9999", "0001")), f"{text!r} should have been refused"
        else:
            assert [e.line for e in reader.errors] == [1], text
