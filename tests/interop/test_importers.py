"""Every input shape an operator has, found by content, read to watch events."""

from __future__ import annotations

import gzip
import io
import json

import orjson
import pytest
import yaml

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import TraceWriter
from handoff.interop.importers import open_events

T0 = "2026-03-01T10:00:00Z"


def _pod(name, node="", phase="Pending", rv="10", **status):
    spec = {
        "containers": [
            {
                "name": "c",
                "image": "nginx",
                "env": [{"name": "DB_PASSWORD", "value": "hunter2"}],
            }
        ]
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "creationTimestamp": T0,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"secret": 1}'},
        },
        "spec": spec,
        "status": {"phase": phase, **status},
    }


RUNNING = _pod(
    "web",
    "worker-1",
    "Running",
    startTime="2026-03-01T10:00:02Z",
    conditions=[
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-03-01T10:00:01Z"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T10:00:05Z"},
    ],
    containerStatuses=[{"name": "c", "state": {"running": {"startedAt": "2026-03-01T10:00:04Z"}}}],
)
REJECTED = _pod(
    "bigcpu",
    "worker-1",
    "Failed",
    reason="OutOfcpu",
    message="Pod was rejected: Node didn't have enough resource: cpu, requested: 100000, "
    "used: 950, capacity: 4000",
    startTime="2026-03-01T10:00:03Z",
)
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "worker-1", "uid": "n1", "resourceVersion": "3", "creationTimestamp": T0},
    "status": {
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "lastHeartbeatTime": "2026-03-01T10:00:30Z",
                "lastTransitionTime": T0,
            }
        ]
    },
}
SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "s"},
    "data": {"k": "c2VjcmV0"},
}


def _list(*items):
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": list(items),
    }


def _kubectl(value) -> bytes:
    """kubectl's -o json: four-space indentation."""
    return json.dumps(value, indent=4).encode() + b"\n"


def _read(data: bytes):
    reader = open_events(io.BytesIO(data))
    return list(reader), reader


def _verdicts(events):
    return {p["name"]: (p["verdict"], p["reason"]) for p in build_report(fold(events))["pods"]}


def test_it_reads_a_kubectl_list_at_the_snapshots_time():
    events, reader = _read(_kubectl(_list(NODE, RUNNING, REJECTED, SECRET)))

    assert reader.format == "snapshot"
    assert [e.type for e in events] == ["ADDED"] * 3
    # The newest timestamp is the node's heartbeat at 10:00:30; the list is 2 s later.
    assert {e.observed for e in events} == {"2026-03-01T10:00:32.000000Z"}
    assert reader.skipped == {"Secret": 1}
    assert _verdicts(events) == {"web": ("running", None), "bigcpu": ("rejected", "OutOfcpu")}


def test_it_dates_milestones_from_the_objects_own_timestamps():
    events, _ = _read(_kubectl(_list(NODE, RUNNING)))
    report = build_report(fold(events))
    (pod,) = report["pods"]

    assert pod["milestones"]["bound"] == "2026-03-01T10:00:01.000000Z"
    assert pod["milestones"]["kubelet_ack"] == "2026-03-01T10:00:02.000000Z"
    assert pod["milestones"]["running"] == "2026-03-01T10:00:04.000000Z"
    # A snapshot shows what had happened, never when it was seen to: durations ending
    # before it are not observed (issue 21), left out of the percentiles and counted.
    assert pod["durations"]["create_to_running"] is None
    startup = report["summary"]["durations"]["create_to_running"]
    assert startup == {"p50": None, "p90": None, "p99": None, "count": 0, "not_observed": 1}


def test_it_reads_several_lists_and_bare_arrays_one_after_another():
    data = _kubectl(_list(RUNNING)) + json.dumps([REJECTED, NODE]).encode() + b"\n"
    data += _kubectl(_list(_pod("late")))
    events, reader = _read(data)

    assert reader.errors == []
    assert sorted(_verdicts(events)) == ["bigcpu", "late", "web"]


def test_it_infers_kinds_in_arrays_without_them():
    bare = {k: v for k, v in RUNNING.items() if k not in ("kind", "apiVersion")}
    event = {
        "metadata": {"name": "e1", "namespace": "default", "uid": "e1"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web", "uid": "uid-web"},
        "reason": "Scheduled",
        "message": "Successfully assigned default/web to worker-1",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": "2026-03-01T10:00:01Z",
        "lastTimestamp": "2026-03-01T10:00:01Z",
        "count": 1,
        "type": "Normal",
    }
    events, _ = _read(json.dumps([bare, event]).encode())

    assert [e.object.kind for e in events] == ["Pod", "Event"]
    (pod,) = build_report(fold(events))["pods"]
    assert pod["binding"] == "scheduler"


def test_it_reads_yaml():
    data = yaml.safe_dump_all([_list(RUNNING), REJECTED]).encode()
    events, reader = _read(data)

    assert reader.format == "yaml"
    assert _verdicts(events) == {"web": ("running", None), "bigcpu": ("rejected", "OutOfcpu")}


def test_it_reads_pretty_printed_watch_events_and_orders_their_times():
    pending = _pod("web", rv="5")
    bound = _pod(
        "web",
        "worker-1",
        rv="6",
        conditions=[
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-03-01T10:00:01Z"}
        ],
    )
    running = dict(RUNNING, metadata=dict(RUNNING["metadata"], resourceVersion="9"))
    deleted = dict(running, metadata=dict(running["metadata"], resourceVersion="12"))
    data = b"".join(
        _kubectl({"type": t, "object": o})
        for t, o in [
            ("ADDED", pending),
            ("MODIFIED", bound),
            ("MODIFIED", running),
            ("DELETED", deleted),
        ]
    )
    events, reader = _read(data)

    assert reader.format == "watch"
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert [e.observed[11:23] for e in events] == [
        "10:00:00.500",
        "10:00:01.500",
        "10:00:05.500",
        "10:00:05.500",
    ]
    (pod,) = build_report(fold(events))["pods"]
    assert pod["verdict"] == "deleted"
    assert pod["binding"] == "scheduler"


def test_it_reads_plain_watch_output_without_event_types():
    data = _kubectl(_pod("web", rv="5")) + _kubectl(dict(RUNNING))
    events, reader = _read(data)

    assert reader.format == "watch"
    assert [e.type for e in events] == ["ADDED", "MODIFIED"]
    assert _verdicts(events) == {"web": ("running", None)}


def test_it_reads_trace_v1_as_the_trace_reader_does(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    with TraceWriter(path, cluster="prod") as writer:
        writer.write("2026-03-01T10:00:00.100000Z", "ADDED", REJECTED)
    reader = open_events(path)
    events = list(reader)

    assert reader.format == "trace"
    assert reader.header.cluster == "prod"
    assert events[0].observed == "2026-03-01T10:00:00.100000Z"


def test_it_reads_gzip_by_its_magic_bytes_whatever_the_name(tmp_path):
    path = tmp_path / "pods.json"
    path.write_bytes(gzip.compress(_kubectl(_list(RUNNING))))

    events = list(open_events(path))

    assert [e.object.metadata.name for e in events] == ["web"]


def test_it_keeps_secrets_out_of_every_line():
    for data in (
        _kubectl(_list(RUNNING)),
        _kubectl({"type": "ADDED", "object": RUNNING}),
        yaml.safe_dump(RUNNING).encode(),
    ):
        events, _ = _read(data)
        raw = b"".join(e.raw for e in events)
        assert b"hunter2" not in raw
        assert b"last-applied" not in raw
        assert b"DB_PASSWORD" in raw  # the name stays; its value never does


def test_it_reports_the_progress_of_a_large_input(tmp_path):
    path = tmp_path / "big.json"
    pods = [_pod(f"p{i}") for i in range(3000)]
    path.write_bytes(_kubectl(_list(*pods)))
    seen = []

    events = list(open_events(path, on_progress=lambda done, total: seen.append((done, total))))

    assert len(events) == 3000
    assert seen[-1] == (path.stat().st_size, path.stat().st_size)
    assert len(seen) >= 2


# ------------------------------------------------------------------ bad input


def test_it_reports_a_truncated_gzip_and_keeps_what_came_before(tmp_path):
    lines = b"".join(
        orjson.dumps({"type": "ADDED", "object": _pod(f"p{i}")}) + b"\n" for i in range(2000)
    )
    packed = gzip.compress(lines)
    path = tmp_path / "cut.json.gz"
    path.write_bytes(packed[: len(packed) // 2])

    reader = open_events(path)
    events = list(reader)

    assert 0 < len(events) < 2000
    (error,) = [e for e in reader.errors if "stream ended early" in e.message]
    assert error.line > len(events)
    # The line the break cut in two is reported too; nothing else is.
    assert len(reader.errors) <= 2


def test_it_reports_invalid_utf8_and_garbage_by_line_and_reads_the_rest():
    good = orjson.dumps({"type": "ADDED", "object": _pod("ok")})
    data = b"\n".join(
        [
            good,
            b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": "\xff\xfe"}}}',
            b"this is not json",
            orjson.dumps({"type": "ADDED", "object": _pod("also-ok")}),
            b'{"type": "ADDED", "object": {"kind": "Pod", "metadata": {"name": 7}}}',
        ]
    )
    events, reader = _read(data + b"\n")

    assert [e.object.metadata.name for e in events] == ["ok", "also-ok"]
    assert [error.line for error in reader.errors] == [2, 3, 5]
    assert "not JSON" in reader.errors[0].message
    assert "never closes" in reader.errors[1].message or "not JSON" in reader.errors[1].message
    assert "unexpected Pod shape" in reader.errors[2].message


def test_it_salvages_the_items_of_a_list_cut_off_at_the_end():
    whole = _kubectl(_list(*[_pod(f"p{i}") for i in range(10)]))
    events, reader = _read(whole[: int(len(whole) * 0.75)])

    assert 5 <= len(events) < 10
    assert "cut off" in reader.errors[0].message


def test_it_reports_yaml_syntax_errors_with_their_line():
    data = yaml.safe_dump(RUNNING).encode() + b"---\nkind: Pod\n  bad: [indent\n"
    _, reader = _read(data)

    (error,) = reader.errors
    assert error.line > 10
    assert "not YAML" in error.message


@pytest.mark.parametrize("data", [b"", b"\n\n  \n", b"\x00\x01garbage"])
def test_it_reads_nothing_from_nothing_without_raising(data):
    events, reader = _read(data)

    assert events == []
    assert reader.format in ("empty", "yaml")


def test_it_numbers_trace_lines_as_the_file_does():
    good = orjson.dumps({"observed": "2026-03-01T10:00:00Z", "type": "ADDED", "object": REJECTED})
    data = b"\n" + good + b"\n\n\nnot json\n" + good + b"\n"
    events, reader = _read(data)

    assert reader.format == "trace"
    assert [e.line for e in events] == [2, 6]
    assert [error.line for error in reader.errors] == [5]


def test_it_reads_gzip_from_an_open_stream_too():
    data = gzip.compress(_kubectl(_list(RUNNING)))

    events, reader = _read(data)

    assert reader.format == "snapshot"
    assert [e.object.metadata.name for e in events] == ["web"]
