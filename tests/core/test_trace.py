"""Trace format v1: reading, writing, and surviving bad lines."""

from __future__ import annotations

import gzip
import io

import orjson

from handoff.core.trace import TraceReader, TraceWriter, format_time, parse_time, read_all

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "uid": "u1"}}


def _line(**record) -> bytes:
    return orjson.dumps(record) + b"\n"


def test_it_round_trips_through_the_writer(tmp_path):
    path = tmp_path / "t.jsonl"
    with TraceWriter(path, cluster="prod", source="test") as writer:
        writer.write("2026-03-01T10:00:00.000001Z", "ADDED", POD)

    events, reader = read_all(path)

    assert reader.header.cluster == "prod"
    assert reader.header.source == "test"
    (event,) = events
    assert (event.observed, event.type, event.object.kind) == (
        "2026-03-01T10:00:00.000001Z",
        "ADDED",
        "Pod",
    )
    assert (event.object.metadata.name, event.object.metadata.uid) == ("p", "u1")
    assert orjson.loads(event.raw)["object"] == POD
    assert event.line == 2


def test_it_reads_gzip_by_content_not_by_name(tmp_path):
    path = tmp_path / "plain-name.jsonl"
    path.write_bytes(
        gzip.compress(_line(observed="2026-03-01T10:00:00Z", type="ADDED", object=POD))
    )

    events, reader = read_all(path)

    assert len(events) == 1
    assert reader.errors == []


def test_it_writes_gzip_when_the_name_says_so_and_identically_twice(tmp_path):
    blobs = []
    for name in ("a.jsonl.gz", "b.jsonl.gz"):
        with TraceWriter(tmp_path / name, cluster="c") as writer:
            writer.write("2026-03-01T10:00:00.000000Z", "ADDED", POD)
        blobs.append((tmp_path / name).read_bytes())

    assert blobs[0][:2] == b"\x1f\x8b"
    assert blobs[0] == blobs[1]


def test_it_reports_bad_lines_by_number_and_keeps_the_rest():
    good = _line(observed="2026-03-01T10:00:00Z", type="ADDED", object=POD)
    data = b"".join(
        [
            b'{"handoff_trace": 1, "cluster": "x"}\n',
            b"{not json\n",
            good,
            _line(observed="yesterday", type="ADDED", object=POD),
            _line(observed="2026-03-01T10:00:01Z", type="UPSERT", object=POD),
            _line(observed="2026-03-01T10:00:01Z", type="ADDED", object=[1]),
            b"[1, 2]\n",
            b"\n",
            good,
        ]
    )

    events, reader = read_all(data)

    assert len(events) == 2
    assert [e.line for e in reader.errors] == [2, 4, 5, 6, 7]
    assert "not JSON" in reader.errors[0].message
    assert "RFC 3339" in reader.errors[1].message
    assert "UPSERT" in reader.errors[2].message


def test_it_counts_other_kinds_as_skipped():
    data = _line(
        observed="2026-03-01T10:00:00Z", type="ADDED", object={"kind": "ConfigMap", "metadata": {}}
    ) + _line(observed="2026-03-01T10:00:00Z", type="BOOKMARK", object={"kind": "Pod"})

    events, reader = read_all(data)

    assert [e.type for e in events] == ["BOOKMARK"]
    assert reader.skipped == {"ConfigMap": 1}


def test_it_reports_a_truncated_gzip_after_keeping_what_came_before(tmp_path):
    lines = b"".join(
        _line(observed=f"2026-03-01T10:00:{i:02d}Z", type="ADDED", object=POD) for i in range(50)
    )
    blob = gzip.compress(lines)
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(blob[: len(blob) // 2])

    events, reader = read_all(path)

    assert reader.errors
    assert "ended early" in reader.errors[-1].message
    assert len(events) < 50


def test_it_rejects_an_unknown_trace_version():
    data = b'{"handoff_trace": 2}\n' + _line(
        observed="2026-03-01T10:00:00Z", type="ADDED", object=POD
    )

    events, reader = read_all(data)

    assert len(events) == 1
    assert reader.header is None
    assert "unsupported trace version" in reader.errors[0].message


def test_it_reports_a_known_kind_with_fields_of_the_wrong_type():
    bad = {"kind": "Pod", "metadata": {"name": 7}}
    data = _line(observed="2026-03-01T10:00:00Z", type="ADDED", object=bad) + _line(
        observed="2026-03-01T10:00:01Z", type="ADDED", object=POD
    )

    events, reader = read_all(data)

    assert len(events) == 1
    assert reader.errors[0].line == 1
    assert "unexpected Pod shape" in reader.errors[0].message
    assert "metadata.name" in reader.errors[0].message


def test_it_skips_other_kinds_whatever_their_shape():
    odd = {"kind": "Widget", "metadata": {"name": 7}, "status": [1, 2]}
    events, reader = read_all(_line(observed="2026-03-01T10:00:00Z", type="ADDED", object=odd))

    assert events == []
    assert reader.errors == []
    assert reader.skipped == {"Widget": 1}


def test_it_reads_from_a_stream():
    reader = TraceReader(
        io.BytesIO(_line(observed="2026-03-01T10:00:00Z", type="ADDED", object=POD))
    )

    assert len(list(reader)) == 1


def test_times_round_trip_with_microseconds_and_offsets():
    assert format_time(parse_time("2026-03-01T10:00:00.123456Z")) == "2026-03-01T10:00:00.123456Z"
    assert parse_time("2015-02-09T05:39:19-05:00") == parse_time("2015-02-09T10:39:19Z")
