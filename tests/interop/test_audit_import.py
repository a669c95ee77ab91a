"""An audit log and a watch trace of the same simulated incident give the same verdicts."""

from __future__ import annotations

import io

import orjson
import pytest

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import read_all
from handoff.interop.importers import open_events
from handoff.sim.runner import find_scenario, run
from handoff.sim.scenarios import Options
from tests.interop.auditlog import PODGC, audited


def _both(monkeypatch, scenario: str, tmp_path):
    trace = tmp_path / "watch.jsonl"
    with audited(monkeypatch) as recorders:
        run(find_scenario(scenario, None), Options(seed=3), record=trace)
    (recorder,) = recorders
    log = tmp_path / "audit.log"
    log.write_bytes(recorder.text())
    return trace, log


def _verdicts(events, at):
    report = build_report(fold(events), at=at)
    return {
        p["uid"]: (p["namespace"], p["name"], p["verdict"], p["reason"]) for p in report["pods"]
    }


@pytest.mark.parametrize("scenario", ["handoff-failures", "manual-scheduling"])
def test_it_gives_the_watch_traces_verdicts_from_the_audit_log(monkeypatch, tmp_path, scenario):
    trace, log = _both(monkeypatch, scenario, tmp_path)
    watched, _ = read_all(trace)
    reader = open_events(log)
    audited_events = list(reader)
    at = watched[-1].time()

    from_watch = _verdicts(watched, at)
    from_audit = _verdicts(audited_events, at)

    assert reader.format == "audit"
    assert reader.errors == []
    assert reader.skipped["audit stage RequestReceived"] > 0
    assert from_audit == from_watch
    assert len({v[2] for v in from_watch.values()}) >= 4


def test_it_dates_the_binding_from_the_schedulers_request(monkeypatch, tmp_path):
    _, log = _both(monkeypatch, "handoff-failures", tmp_path)
    lines = [orjson.loads(line) for line in log.read_bytes().splitlines()]
    binds = [
        e
        for e in lines
        if e["stage"] == "ResponseComplete" and e["objectRef"].get("subresource") == "binding"
    ]
    stale = next(e for e in binds if e["objectRef"]["name"] == "stale")

    report = build_report(fold(open_events(log)))
    pod = next(p for p in report["pods"] if p["name"] == "stale")

    assert stale["user"]["username"] == "system:kube-scheduler"
    assert pod["milestones"]["bound"] == stale["stageTimestamp"]
    assert (pod["verdict"], pod["reason"]) == ("stuck", "kubelet-silent")


def test_it_reads_podgc_deletions_as_podgc(monkeypatch, tmp_path):
    _, log = _both(monkeypatch, "handoff-failures", tmp_path)
    deletes = [
        orjson.loads(line)
        for line in log.read_bytes().splitlines()
        if b'"delete"' in line and PODGC.encode() in line and b"ResponseComplete" in line
    ]
    report = build_report(fold(open_events(log)))
    by_name = {p["name"]: p for p in report["pods"]}

    assert deletes
    for delete in deletes:
        assert by_name[delete["objectRef"]["name"]]["verdict"] == "podgc-deleted"


def _audit(verb, name, user, at, level="Metadata", **extra):
    ref = {"resource": "pods", "namespace": "default", "name": name, "apiVersion": "v1"}
    ref.update(extra.pop("ref", {}))
    return orjson.dumps(
        {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": level,
            "auditID": f"{verb}-{name}-{at}",
            "stage": "ResponseComplete",
            "verb": verb,
            "user": {"username": user},
            "objectRef": ref,
            "responseStatus": {"metadata": {}, "code": 201 if verb == "create" else 200},
            "stageTimestamp": f"2026-03-01T10:00:{at}Z",
            **extra,
        }
    )


def test_it_rebuilds_a_pod_from_a_metadata_level_log():
    lines = [
        _audit(
            "create", "web", "system:serviceaccount:kube-system:replicaset-controller", "01.250000"
        ),
        _audit(
            "create", "web", "system:kube-scheduler", "01.400000", ref={"subresource": "binding"}
        ),
        _audit("patch", "web", "system:node:worker-7", "02.100000", ref={"subresource": "status"}),
        _audit("get", "web", "system:node:worker-7", "02.200000"),
        _audit("create", "token", "system:admin", "02.300000", ref={"resource": "secrets"}),
        _audit(
            "delete",
            "web",
            "system:admin",
            "03.000000",
            responseStatus={"metadata": {}, "code": 404},
        ),
    ]
    reader = open_events(io.BytesIO(b"\n".join(lines) + b"\n"))
    events = list(reader)
    report = build_report(fold(events))
    (pod,) = report["pods"]

    assert [e.type for e in events] == ["ADDED", "MODIFIED", "MODIFIED"]
    assert pod["node"] == "worker-7"
    assert pod["milestones"]["created"] == "2026-03-01T10:00:01.250000Z"
    assert pod["binding"] == "scheduler"
    assert pod["verdict"] == "awaiting-kubelet"
    assert reader.skipped["audit other resource"] == 1
    assert reader.skipped["audit get"] == 1
    assert reader.skipped["audit failed request"] == 1
    assert b"token" not in b"".join(e.raw for e in events)


def test_it_keeps_the_deletion_of_a_node_older_than_the_log():
    delete = _audit(
        "delete",
        "worker-9",
        "system:serviceaccount:kube-system:cloud-node-manager",
        "05.000000",
        ref={"resource": "nodes", "namespace": None},
    )
    reader = open_events(io.BytesIO(delete + b"\n"))
    (event,) = list(reader)

    assert (event.type, event.object.kind, event.object.metadata.name) == (
        "DELETED",
        "Node",
        "worker-9",
    )
