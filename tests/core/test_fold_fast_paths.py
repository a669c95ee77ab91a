"""The fold's fast paths against the slow ones they stand in for.

``fold(TraceReader(...))`` hands each event's parts straight to the timeline
(``TraceReader.feed``) instead of building a ``WatchEvent`` per line; the reader keeps
the previous line's second instead of looking it up; an Event's ``eventTime`` is read
from its cached second. Each must give exactly what the general path gives.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from handoff.core import facts as kube
from handoff.core import trace
from handoff.core.schema import SECONDS, ValidationError, to_object
from handoff.core.snapshot import dump_state
from handoff.core.timeline import fold
from handoff.core.trace import TraceReader, WatchEvent, observed_time, read_all

TRACES = sorted((Path(__file__).parents[1] / "data" / "traces").glob("*.jsonl"))


def _pod(name: str, rv: int, phase: str = "Pending", node: str | None = None) -> dict:
    spec = {"nodeName": node} if node else {}
    return {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def _event(name: str, reason: str, event_time: str | None) -> dict:
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"{name}.{reason}", "namespace": "default", "uid": f"ev-{reason}"},
        "involvedObject": {
            "kind": "Pod",
            "namespace": "default",
            "name": name,
            "uid": f"uid-{name}",
        },
        "reason": reason,
        "message": f"Successfully assigned default/{name} to node-1",
        "source": {},
        "firstTimestamp": None,
        "eventTime": event_time,
        "reportingComponent": "default-scheduler",
    }


def _line(observed: object, type_: object, obj: object) -> bytes:
    return orjson.dumps({"observed": observed, "type": type_, "object": obj}) + b"\n"


def messy_trace() -> bytes:
    """Every kind of line the reader treats apart: a header, seconds that repeat, move
    on and go back, other time forms, bad lines, other kinds, bookmarks and errors."""
    lines = [orjson.dumps({"handoff_trace": 1, "cluster": "c"}) + b"\n"]
    lines.append(_line("2026-01-01T00:00:01.000100Z", "ADDED", _pod("a", 10)))
    lines.append(_line("2026-01-01T00:00:01.500000Z", "ADDED", _pod("b", 11)))
    lines.append(_line("2026-01-01T00:00:01.900000Z", "ADDED", _event("a", "Scheduled", None)))
    lines.append(
        _line(
            "2026-01-01T00:00:02.000001Z",
            "ADDED",
            _event("b", "Scheduled", "2026-01-01T00:00:01.987654Z"),
        )
    )
    lines.append(_line("2026-01-01T00:00:02.250000Z", "MODIFIED", _pod("a", 12, node="node-1")))
    lines.append(_line("2026-01-01T00:00:01.750000Z", "MODIFIED", _pod("b", 13, node="n2")))
    lines.append(
        _line("2026-01-01T00:00:02.5+00:00", "MODIFIED", _pod("a", 14, "Running", "node-1"))
    )
    lines.append(_line("2026-01-01t00:00:03.100000z", "MODIFIED", _pod("b", 15, "Running", "n2")))
    lines.append(_line("2026-01-01T00:00:03", "ADDED", _pod("c", 16)))
    lines.append(_line("2026-01-01T00:00:03.10000Z", "ADDED", _pod("d", 17)))
    lines.append(_line("2026-01-01T00:00:03.1000000Z", "ADDED", _pod("e", 18)))
    lines.append(_line("2026-01-01T00:00:03.1x0000Z", "ADDED", _pod("f", 19)))
    lines.append(_line("not a time", "ADDED", _pod("g", 20)))
    lines.append(_line("2026-01-01T00:00:04.000000Z", "SOMETHING", _pod("h", 21)))
    lines.append(b"{not json\n")
    lines.append(b"\n")
    lines.append(_line("2026-01-01T00:00:04.100000Z", "ADDED", {"kind": "Deployment"}))
    lines.append(_line("2026-01-01T00:00:04.200000Z", "BOOKMARK", {"kind": "Pod"}))
    lines.append(
        _line(
            "2026-01-01T00:00:04.300000Z",
            "ERROR",
            {"kind": "Status", "status": "Failure", "message": "too old", "code": 410},
        )
    )
    lines.append(_line("2026-01-01T00:00:04.400000Z", "ADDED", {"kind": "Pod", "spec": []}))
    lines.append(
        _line("2026-01-01T00:00:05.000000Z", "DELETED", _pod("a", 30, "Running", "node-1"))
    )
    return b"".join(lines)


def read_all_kinds(
    data: bytes, kinds: frozenset[str] | None = None
) -> tuple[list[WatchEvent], TraceReader]:
    """``read_all`` with a choice of kinds: every event iterated, and the reader."""
    reader = TraceReader(io.BytesIO(data), kinds=kinds)
    return list(reader), reader


def _sources() -> list[tuple[str, bytes]]:
    return [(path.name, path.read_bytes()) for path in TRACES] + [("messy", messy_trace())]


@pytest.mark.parametrize(
    ("name", "data"), _sources(), ids=lambda x: x if isinstance(x, str) else ""
)
@pytest.mark.parametrize("kinds", [frozenset({"Pod", "Node", "Event"}), None])
def test_feeding_the_fold_gives_what_folding_watch_events_gives(name, data, kinds):
    fed = TraceReader(io.BytesIO(data), kinds=kinds)
    events, iterated = read_all_kinds(data, kinds)
    assert dump_state(fold(fed)) == dump_state(fold(events))
    assert (fed.errors, fed.skipped, fed.lines_read, fed.header) == (
        iterated.errors,
        iterated.skipped,
        iterated.lines_read,
        iterated.header,
    )
    if events:
        middle = events[len(events) // 2].time()
        until = dump_state(fold(TraceReader(io.BytesIO(data), kinds=kinds), until=middle))
        assert until == dump_state(fold(events, until=middle))


def test_the_messy_trace_has_what_it_claims():
    events, reader = read_all(messy_trace())
    assert reader.header is not None
    assert len(reader.errors) >= 5
    assert reader.skipped["Deployment"] == 1
    assert reader.skipped["Status"] == 1  # the ERROR, not a kind the fold reads by default
    assert {e.type for e in events} >= {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}
    every, _reader = read_all_kinds(messy_trace())
    assert "ERROR" in {e.type for e in every}


def _observed_times_as_before(data: bytes) -> list[float]:
    """The reader's times as it computed them before it kept the previous second: the
    cached second plus the fraction when the second is cached, else ``observed_time``."""
    times = []
    for raw in data.splitlines():
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        observed = record.get("observed") if isinstance(record, dict) else None
        if not isinstance(observed, str) or record.get("type") not in trace.WATCH_TYPES:
            continue
        try:
            to_object(record.get("object"))
        except ValidationError:
            continue  # a bad object: reported, not an event
        second = SECONDS.get(observed[:19])
        fraction = observed[20:26]
        if (
            len(observed) == 27
            and observed[19] == "."
            and observed[26] == "Z"
            and second is not None
            and fraction.isascii()
            and fraction.isdigit()
        ):
            times.append(second + float(fraction) / 1_000_000)
        else:
            at = observed_time(observed)
            if at is not None:
                times.append(at)
    return times


@pytest.mark.parametrize(
    ("name", "data"), _sources(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_the_reader_keeps_the_times_it_computed_before(name, data):
    SECONDS.clear()
    expected = _observed_times_as_before(data)
    SECONDS.clear()
    got = [at for at, _type, _obj in _fed(data)]
    assert got == expected


def _fed(data: bytes) -> list[tuple[float, str, object]]:
    seen: list[tuple[float, str, object]] = []
    TraceReader(io.BytesIO(data), kinds=None).feed(lambda *parts: seen.append(parts))
    return seen


@settings(max_examples=500, deadline=None)
@given(
    st.datetimes(
        min_value=datetime(1970, 1, 2),
        max_value=datetime(2200, 1, 1),
    )
)
def test_micro_time_is_exactly_what_datetime_gives(moment):
    text = moment.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    expected = datetime.fromisoformat(text).timestamp()
    assert kube.micro_time(text) == expected  # parsed, or from a cached second
    assert kube.micro_time(text) == expected  # from the cached second


def test_micro_time_reads_other_forms_as_timestamp_does():
    for text in (
        None,
        "",
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00.5Z",
        "2026-01-01T00:00:00.123456+02:00",
        "2026-01-01T00:00:00.12345xZ",
        "garbage",
    ):
        assert kube.micro_time(text) == kube.timestamp(text)


def test_trace_and_facts_read_seconds_from_one_cache():
    """A trace's ``observed`` second serves an Event's ``eventTime`` in the same second
    (schema.SECONDS): one RFC 3339 cache, and the same value as a full parse."""
    SECONDS.clear()
    assert observed_time("2026-01-02T03:04:05.250000Z") is not None
    assert list(SECONDS) == ["2026-01-02T03:04:05"]
    text = "2026-01-02T03:04:05.750001Z"
    assert kube.micro_time(text) == datetime.fromisoformat(text).timestamp()
    assert list(SECONDS) == ["2026-01-02T03:04:05"]
