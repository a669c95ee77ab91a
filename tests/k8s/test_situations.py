"""The seed situations on a real v1.20.2 control plane, through the path a user takes:
``clusters add NAME --kubeconfig … --start`` → Celery watch streams (as deploy/rbac.yaml's
service account) → Redis → ``/api``. One test per situation asserts verdict, binding, node
and reason as the API reports them; the same run, ``record``ed, triages offline
(``triage --trace``) to the same answers.

Every situation is staged at once (tests/k8s/situations.py), with test_kubelet_situations.py's,
when the first k8s test that needs them starts (tests/k8s/staging.py), so PodGC's 40-80 s
and the node lifecycle controller's 40 s + tolerationSeconds run side by side and while
other k8s tests run.
What the control plane does in each is written down in docs/real-control-plane.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from devtools.controlplane import ControlPlane
from handoff.core.trace import parse_time
from tests.k8s import situations as s
from tests.k8s.conftest import READER
from tests.k8s.stack import SETTINGS, Stack, answer, api_pods, wait_for
from tests.k8s.stack import assert_offline_agrees as offline_agrees
from tests.k8s.staging import SITUATIONS, Staging

CLUSTER = SITUATIONS
STUCK_AFTER = float(SETTINGS["HANDOFF_STUCK_AFTER"])


@dataclass
class Run:
    stack: Stack
    staged: s.Staged
    tmp: Path
    audit_from: int  # audit.log's size before the cluster was added


@pytest.fixture(scope="module")
def run(staging: Staging, stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The situations staged with the session's (tests/k8s/staging.py)."""
    assert staging.situations is not None
    situations = staging.situations
    return Run(
        stack, situations.staged, tmp_path_factory.mktemp("situations"), situations.audit_from
    )


def live(run: Run, key: str) -> tuple[str, list[dict[str, Any]]]:
    """(evaluated_at, pod views) of the situation's namespace, from /api."""
    return api_pods(run.stack, CLUSTER, s.SITUATIONS[key].namespace)


def settle(
    run: Run, key: str, ok: Callable[[list[dict[str, Any]]], bool], timeout: float
) -> list[dict[str, Any]]:
    """The situation's pod views once ``ok`` holds for them."""
    return wait_for(
        lambda: live(run, key)[1], ok, timeout, f"situation {key}: {s.SITUATIONS[key].what}"
    )


def assert_offline_agrees(run: Run, key: str) -> None:
    offline_agrees(run.stack, CLUSTER, s.SITUATIONS[key].namespace, run.tmp)


def one(views: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [v for v in views if v["name"] == name]
    assert len(found) == 1, views
    return found[0]


def test_a_nodename_typo_is_deleted_by_podgc_without_an_event(run: Run) -> None:
    views = settle(run, "a", lambda vs: any(v["verdict"] == "podgc-deleted" for v in vs), 180)
    web = one(views, "web")
    assert answer(web) == s.EXPECTED["a"]["web"]
    assert web["node_exists"] is False
    # v1.20 PodGC: no status change, no DisruptionTarget, no event; 40 s quarantine first.
    assert web["events"] == []
    lived = parse_time(web["milestones"]["deleted"]) - parse_time(web["milestones"]["created"])
    assert lived >= 39
    assert_offline_agrees(run, "a")


def test_b_a_pod_bound_to_a_node_whose_kubelet_is_silent_is_stuck(run: Run) -> None:
    views = settle(run, "b", lambda vs: vs and vs[0]["verdict"] == "stuck", STUCK_AFTER + 60)
    api = one(views, "api")
    assert answer(api) == s.EXPECTED["b"]["api"]
    assert api["node_exists"] is True
    assert [e["reason"] for e in api["events"]] == ["Scheduled"]
    assert_offline_agrees(run, "b")


def test_c_no_node_fits_failed_scheduling(run: Run) -> None:
    views = settle(run, "c", lambda vs: vs and vs[0]["events"], 60)
    picky = one(views, "picky")
    assert answer(picky) == s.EXPECTED["c"]["picky"]
    failed = [e for e in picky["events"] if e["reason"] == "FailedScheduling"]
    assert failed, picky["events"]
    # v1.20's wording: no preemption sentence, "didn't match Pod's node affinity" (newer
    # releases add "/selector"), the NoSchedule taint quoted {key: value}.
    assert failed[0]["message"] == (
        "0/3 nodes are available: 1 node(s) had taint {dedicated: infra}, that the pod didn't"
        " tolerate, 2 node(s) didn't match Pod's node affinity."
    )
    assert_offline_agrees(run, "c")


def test_d_nodename_bypasses_a_noschedule_taint_and_waits_for_the_kubelet(run: Run) -> None:
    views = settle(run, "d", lambda vs: vs and vs[0]["verdict"] == "stuck", STUCK_AFTER + 60)
    pinned = one(views, "pinned")
    assert answer(pinned) == s.EXPECTED["d"]["pinned"]
    assert pinned["node_exists"] is True
    assert pinned["events"] == []  # no scheduler involved, no kubelet to speak
    assert_offline_agrees(run, "d")


def test_e_a_node_lost_after_binding_and_the_noexecute_eviction(run: Run) -> None:
    grace = 40 + 5 + s.TOLERATION_S  # node monitor grace + period + the pod's toleration
    views = settle(run, "e", lambda vs: vs and vs[0]["verdict"] == "evicted", grace + 90)
    fragile = one(views, "fragile")
    assert answer(fragile) == s.EXPECTED["e"]["fragile"]
    reasons = [e["reason"] for e in fragile["events"]]
    assert reasons[0] == "Scheduled"
    assert "TaintManagerEviction" in reasons
    assert_offline_agrees(run, "e")


def test_f_a_deployment_pinned_to_a_missing_node_loops_through_podgc(run: Run) -> None:
    def looped(views: list[dict[str, Any]]) -> bool:
        gone = [v for v in views if v["verdict"] == "podgc-deleted"]
        return bool(gone) and any(v["milestones"]["deleted"] is None for v in views)

    views = settle(run, "f", looped, 180)
    for view in views:
        assert view["owner"]["kind"] == "ReplicaSet"
        assert view["owner"]["name"].startswith("ghost-web-")
        assert view["node"] == s.GONE
        assert view["binding"] == "manual"  # nodeName from the template: never scheduled
        assert view["node_exists"] is False
    deleted = [v for v in views if v["milestones"]["deleted"]]
    assert {answer(v) for v in deleted} == {s.EXPECTED["f"]["deleted"]}
    waiting = [v for v in views if not v["milestones"]["deleted"]]
    assert len(waiting) == 1
    assert waiting[0]["reason"] == "node-missing"
    assert waiting[0]["verdict"] in ("awaiting-kubelet", "stuck")
    assert_offline_agrees(run, "f")


def test_g_a_graceful_delete_no_kubelet_finishes_is_stuck_terminating(run: Run) -> None:
    # Deleted right after binding with a 10 s grace period: Terminating for ever after.
    due = run.staged.started["g"] + 10 + STUCK_AFTER + 5
    time.sleep(max(0.0, due - time.time()))
    views = settle(run, "g", lambda vs: bool(vs), 30)
    draining = one(views, "draining")
    assert draining["milestones"]["deleted"] is None  # the object is still there
    assert answer(draining) == s.EXPECTED["g"]["draining"]
    assert_offline_agrees(run, "g")


def test_the_watchers_asked_for_nothing_outside_the_role(
    run: Run, control_plane: ControlPlane
) -> None:
    """The API server's audit log of the reader: only get/list/watch of pods, nodes and
    events (both groups), and nothing refused. v1.20.2 audits a watch when it ends, so this
    waits for one watch of each to have ended (each ends within 10 s)."""
    allowed = {
        (verb, group, resource)
        for verb in ("get", "list", "watch")
        for group, resource in (
            ("", "pods"),
            ("", "nodes"),
            ("", "events"),
            ("events.k8s.io", "events"),
        )
    }
    watched = {("watch", "", "pods"), ("watch", "", "nodes"), ("watch", "events.k8s.io", "events")}
    mine = wait_for(
        lambda: audited(control_plane, run.audit_from),
        lambda entries: watched <= {asked(e) for e in entries},
        90,
        "a watch of each resource in the audit log",
    )
    requested = {asked(e) for e in mine if e.get("objectRef")}
    assert requested <= allowed, requested - allowed
    refused = [e["requestURI"] for e in mine if e["responseStatus"]["code"] >= 400]
    assert refused == []


def audited(control_plane: ControlPlane, start: int) -> list[dict[str, Any]]:
    with open(control_plane.directory / "audit.log", "rb") as log:
        log.seek(start)
        entries = [orjson.loads(line) for line in log if line.strip()]
    return [e for e in entries if e["user"]["username"] == READER]


def asked(entry: dict[str, Any]) -> tuple[str, str, str]:
    ref = entry.get("objectRef") or {}
    return entry["verb"], ref.get("apiGroup", ""), ref.get("resource", "")
