"""manage.py triage --trace: the on-call operator's offline view."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from handoff.core.trace import TraceWriter

T0 = "2026-03-01T10:00:00Z"


def _pod(name, rv, node="", phase="Pending", **status):
    spec = {"containers": [{"name": "c", "image": "nginx:1.27.3-alpine"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": str(rv),
            "creationTimestamp": T0,
        },
        "spec": spec,
        "status": {"phase": phase, **status},
    }


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "worker-1", "uid": "n1", "resourceVersion": "1"},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
}
REJECTED = _pod(
    "bigcpu",
    12,
    "worker-1",
    "Failed",
    reason="OutOfcpu",
    message="Pod was rejected: Node didn't have enough resource: cpu, requested: 100000, "
    "used: 950, capacity: 4000",
    startTime=T0,
)


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "incident.jsonl"
    with TraceWriter(path, cluster="prod") as writer:
        writer.write("2026-03-01T10:00:00.010000Z", "ADDED", NODE)
        writer.write("2026-03-01T10:00:00.100000Z", "ADDED", _pod("ghost", 10, "worker-2"))
        writer.write("2026-03-01T10:00:00.200000Z", "ADDED", _pod("bigcpu", 11, "worker-1"))
        writer.write("2026-03-01T10:00:00.300000Z", "MODIFIED", REJECTED)
        writer.write("2026-03-01T10:01:05.000000Z", "ADDED", _pod("late", 13))
    return path


def _run(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("triage", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_it_prints_a_table_worst_first(trace):
    out, _ = _run("--trace", str(trace))
    lines = out.splitlines()

    assert lines[0].split()[:2] == ["VERDICT", "REASON"]
    assert lines[1].split()[:3] == ["stuck", "node-missing", "default/ghost"]
    assert "worker-2 (missing)" in lines[1]
    assert lines[2].split()[:3] == ["rejected", "OutOfcpu", "default/bigcpu"]
    assert lines[3].split()[:2] == ["unscheduled", "default/late"]
    assert "\x1b[" not in out


def test_it_prints_the_documented_json(trace):
    out, _ = _run("--trace", str(trace), "--format", "json")
    report = json.loads(out)

    assert report["cluster"] == "prod"
    assert report["evaluated_at"] == "2026-03-01T10:01:05.000000Z"
    assert set(report) >= {"evaluated_at", "cluster", "pods", "summary", "skipped"}
    pod = report["pods"][1]
    assert set(pod) >= {
        "namespace", "name", "uid", "node", "binding", "verdict", "reason",
        "explanation", "milestones", "durations", "events",
    }  # fmt: skip
    assert pod["rejection"] == {
        "reason": "OutOfcpu",
        "message": "Node didn't have enough resource: cpu, requested: 100000, used: 950, "
        "capacity: 4000",
        "resource": "cpu",
        "requested": 100000,
        "used": 950,
        "capacity": 4000,
    }
    assert report["summary"]["verdicts"]["rejected"] == 1
    assert set(report["summary"]["durations"]["create_to_bind"]) == {
        "p50",
        "p90",
        "p99",
        "count",
        "not_observed",
    }


def test_it_evaluates_at_a_given_time_with_only_what_was_seen_by_then(trace):
    out, _ = _run("--trace", str(trace), "--format", "json", "--at", "2026-03-01T10:00:30Z")
    pods = {p["name"]: p for p in json.loads(out)["pods"]}

    assert "late" not in pods
    ghost = pods["ghost"]
    assert (ghost["verdict"], ghost["reason"]) == ("awaiting-kubelet", "node-missing")
    assert pods["ghost"]["podgc"] == {
        "earliest": "2026-03-01T10:00:40.100000Z",
        "latest": "2026-03-01T10:01:20.100000Z",
    }


def test_it_filters_by_verdict(trace):
    out, _ = _run("--trace", str(trace), "--format", "json", "--verdict", "rejected")

    assert [p["name"] for p in json.loads(out)["pods"]] == ["bigcpu"]


def test_it_honours_stuck_after(trace):
    out, _ = _run("--trace", str(trace), "--format", "json", "--stuck-after", "300")
    ghost = next(p for p in json.loads(out)["pods"] if p["name"] == "ghost")

    assert ghost["verdict"] == "awaiting-kubelet"


def test_it_reports_malformed_lines_with_numbers_and_goes_on(trace):
    with trace.open("ab") as stream:
        stream.write(b"{broken\n")
    out, err = _run("--trace", str(trace))

    assert "line 7: not JSON" in err
    assert "default/ghost" in out


def test_it_exits_2_when_nothing_can_be_read(tmp_path):
    path = tmp_path / "junk.jsonl"
    path.write_bytes(b"garbage\nmore garbage\n")

    with pytest.raises(SystemExit) as exit_info:
        _run("--trace", str(path))

    assert exit_info.value.code == 2


def test_it_says_clearly_when_the_file_is_missing(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        _run("--trace", str(tmp_path / "nope.jsonl"))


def test_it_rejects_a_bad_at(trace):
    with pytest.raises(CommandError, match="RFC 3339"):
        _run("--trace", str(trace), "--at", "noon")


def test_it_streams_the_same_json_to_a_real_stdout(trace):
    """On a real stdout the JSON is written pod by pod; it must be the same report."""
    import subprocess
    import sys

    from handoff.core.report import build_report
    from handoff.offline.triage import fold_file

    done = subprocess.run(
        [sys.executable, "manage.py", "triage", "--trace", str(trace), "--format", "json"],
        capture_output=True,
        check=True,
    )
    timeline, reader = fold_file(trace)

    assert json.loads(done.stdout) == json.loads(
        json.dumps(build_report(timeline, errors=reader.errors))
    )
