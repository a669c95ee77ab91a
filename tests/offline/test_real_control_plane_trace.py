"""A recording of Handoff's own stream watching a real v1.20.2 control plane through the
seed situations (tests/k8s/test_situations.py, ``HANDOFF_K8S_RECORD``): triaged offline,
with no control plane, it gives the answers the live tests assert. The shapes it holds are
the ones docs/real-control-plane.md describes (PodGC without status change or event,
TaintManagerEviction without uid, scheduler events through events.k8s.io)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from handoff.core.report import build_report
from handoff.core.trace import TraceReader
from handoff.offline.triage import fold_file
from tests.k8s import situations as s

TRACE = Path(__file__).resolve().parents[1] / "data" / "k8s-v1.20.2" / "situations.jsonl.gz"
STUCK_AFTER = 30.0  # as the live run (tests/k8s/stack.py)


@pytest.fixture(scope="module")
def pods() -> dict[str, list[dict]]:
    timeline, reader = fold_file(TRACE)
    assert not reader.errors
    by_namespace: dict[str, list[dict]] = {}
    for view in build_report(timeline, stuck_after=STUCK_AFTER)["pods"]:
        by_namespace.setdefault(view["namespace"], []).append(view)
    return by_namespace


def answer(view: dict) -> tuple:
    return view["verdict"], view["binding"], view["node"], view["reason"]


@pytest.mark.parametrize(
    "key",
    [
        "a",
        "b",
        "c",
        "d",
        "e",
        "g",
    ],
)
def test_each_situation_triages_offline_as_it_did_live(pods, key: str) -> None:
    views = pods[s.SITUATIONS[key].namespace]
    assert {v["name"]: answer(v) for v in views} == s.EXPECTED[key]


def test_the_pinned_deployment_loops_through_podgc(pods) -> None:
    views = pods[s.SITUATIONS["f"].namespace]
    deleted = [v for v in views if v["milestones"]["deleted"]]
    waiting = [v for v in views if not v["milestones"]["deleted"]]
    assert deleted
    assert {answer(v) for v in deleted} == {s.EXPECTED["f"]["deleted"]}
    assert [v["reason"] for v in waiting] == ["node-missing"]
    assert len({v["owner"]["name"] for v in views}) == 1


def test_podgc_at_v1_20_leaves_no_event_and_no_status_change(pods) -> None:
    (web,) = pods[s.SITUATIONS["a"].namespace]
    assert web["events"] == []
    assert web["node_exists"] is False


def test_the_taint_eviction_event_without_uid_is_matched_by_name(pods) -> None:
    (fragile,) = pods[s.SITUATIONS["e"].namespace]
    reasons = [e["reason"] for e in fragile["events"]]
    assert reasons == ["Scheduled", "TaintManagerEviction"]


# A run in which the pods were created in the very second their nodes joined: the
# node.kubernetes.io/not-ready:NoSchedule taint a Node gets at creation (v1.20's
# TaintNodesByCondition admission plugin) was gone a few hundred milliseconds before the
# pod pinned to tainted-1 was created (by resourceVersion), in the same second.
REGISTRATION = TRACE.with_name("registration-taint.jsonl.gz")


def test_the_kept_run_shows_the_registration_taint_in_the_pods_second() -> None:
    lines = [orjson.loads(e.raw) for e in TraceReader(REGISTRATION) if e.raw]
    pinned = next(
        line["object"]["metadata"]
        for line in lines
        if line["object"]["metadata"].get("name") == "pinned"
    )
    tainted = [
        line["object"]["metadata"]
        for line in lines
        if line["object"].get("kind") == "Node"
        and line["object"]["metadata"]["name"] == s.TAINTED
        and any(
            t["key"] == "node.kubernetes.io/not-ready" for t in line["object"]["spec"]["taints"]
        )
    ]
    assert tainted
    assert int(pinned["resourceVersion"]) > max(int(m["resourceVersion"]) for m in tainted)
    assert tainted[0]["creationTimestamp"] == pinned["creationTimestamp"]


def test_a_pod_bound_in_the_second_its_node_joined_is_not_node_lost() -> None:
    timeline, reader = fold_file(REGISTRATION)
    assert not reader.errors
    views = {v["name"]: v for v in build_report(timeline, stuck_after=STUCK_AFTER)["pods"]}
    assert answer(views["pinned"]) == s.EXPECTED["d"]["pinned"]


def test_the_real_pinned_deployment_is_one_loop_under_its_deployment():
    """Situation (f) on a real v1.20.2 control plane: the Deployment's ReplicaSet
    (``<deployment>-<pod-template-hash>``, pkg/controller/deployment/sync.go) makes pod
    after pod for a missing node and PodGC deletes each (gc_controller.go gcOrphaned)."""
    timeline, _ = fold_file(REGISTRATION)
    report = build_report(timeline, stuck_after=STUCK_AFTER)

    (loop,) = report["owners"]["loops"]
    assert loop["owner"] == {
        "kind": "Deployment",
        "namespace": "pinned-deploy",
        "name": "ghost-web",
    }
    assert (loop["verdict"], loop["reason"]) == ("podgc-deleted", "orphaned")
    assert loop["count"] >= 3
    assert 20 <= loop["every_seconds"] <= 80  # PodGC's 20 s tick after its 40 s quarantine
    pods = [p for p in report["pods"] if p["namespace"] == "pinned-deploy"]
    assert all(
        p["owner"]
        == {
            "kind": "ReplicaSet",
            "name": "ghost-web-6b6768fbc8",
            "workload": {"kind": "Deployment", "name": "ghost-web"},
        }
        for p in pods
    )
