"""The seed situations that need kubelets, on a real v1.20.2 control plane with the
simulator's kubelets attached (``simulate --attach``), read through the path a user takes:
``clusters add NAME --kubeconfig … --start`` → Celery watch streams (as deploy/rbac.yaml's
service account) → Redis → ``/api``. One test per situation asserts verdict, binding, node
and reason; the same run, ``record``ed, triages offline to the same answers.

- kubelet admission rejections, shaped as a v1.20 kubelet shapes them (OutOfcpu,
  OutOfmemory, NodeAffinity: ``Pod <message>``, no conditions, no hostIP);
- a pod bound by the scheduler to a node whose kubelet is silent (it heartbeats);
- a running pod's node stops heartbeating: the real node lifecycle controller taints it,
  the real taint manager evicts the pod (its toleration: 10 s);
- a node deleted under a running pod: the real PodGC deletes the pod (v1.20: grace 0, no
  status, no event), which is ``podgc-deleted``, not a plain ``deleted``.

Everything is staged at once, with test_situations.py's, when the first k8s test that
needs them starts (tests/k8s/staging.py), so the controllers' 40-60 s run side by side and
while other k8s tests run. What the control plane did is written down in docs/real-control-plane.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from handoff.attach.run import Attached
from tests.k8s.kubelet_situations import GONE, HANG, LOST, OK, TOLERATION_S
from tests.k8s.stack import SETTINGS, Stack, answer, api_pods, assert_offline_agrees, wait_for
from tests.k8s.staging import KUBELETS, Staging

CLUSTER = KUBELETS
STUCK_AFTER = float(SETTINGS["HANDOFF_STUCK_AFTER"])

EXPECTED = {
    "kl-rejected": {
        "bigcpu": ("rejected", "manual", OK, "OutOfcpu"),
        "bigmem": ("rejected", "manual", OK, "OutOfmemory"),
        "badsel": ("rejected", "manual", OK, "NodeAffinity"),
    },
    "kl-silent": {"waits": ("stuck", "scheduler", HANG, "kubelet-silent")},
    "kl-lost": {"fragile": ("evicted", "scheduler", LOST, "TaintManagerEviction")},
    "kl-gone": {"orphan": ("podgc-deleted", "scheduler", GONE, "orphaned")},
}


@dataclass
class Run:
    stack: Stack
    kubelets: Attached
    tmp: Path


@pytest.fixture(scope="module")
def run(staging: Staging, stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The situations staged with the session's (tests/k8s/staging.py)."""
    assert staging.kubelets is not None
    return Run(stack, staging.kubelets, tmp_path_factory.mktemp("kubelet-situations"))


def settle(
    run: Run, namespace: str, ok: Callable[[list[dict[str, Any]]], bool], timeout: float
) -> dict[str, dict[str, Any]]:
    """The namespace's pod views by name, once ``ok`` holds for them."""
    views = wait_for(
        lambda: api_pods(run.stack, CLUSTER, namespace)[1], ok, timeout, f"situation {namespace}"
    )
    return {v["name"]: v for v in views}


def verdicts(*wanted: str) -> Callable[[list[dict[str, Any]]], bool]:
    return lambda views: bool(views) and all(v["verdict"] in wanted for v in views)


def test_kubelet_admission_rejections_are_rejected_with_the_kubelets_reason(run: Run) -> None:
    views = settle(run, "kl-rejected", lambda vs: len(vs) == 3 and verdicts("rejected")(vs), 60)
    assert {name: answer(view) for name, view in views.items()} == EXPECTED["kl-rejected"]
    bigcpu = views["bigcpu"]
    assert (
        "Node didn't have enough resource: cpu, requested: 100000"
        in (bigcpu["rejection"]["message"])
    )
    # The kubelet's Warning event, without the "Pod " prefix its status message has (v1.20).
    warning = [e for e in bigcpu["events"] if e["reason"] == "OutOfcpu"]
    assert warning
    assert warning[0]["message"].startswith("Node didn't have enough resource: cpu")
    assert "Predicate NodeAffinity failed" in views["badsel"]["rejection"]["message"]
    assert_offline_agrees(run.stack, CLUSTER, "kl-rejected", run.tmp)


def test_a_pod_bound_to_a_silent_kubelet_is_stuck(run: Run) -> None:
    views = settle(run, "kl-silent", verdicts("stuck"), STUCK_AFTER + 60)
    waits = views["waits"]
    assert answer(waits) == EXPECTED["kl-silent"]["waits"]
    assert waits["node_exists"] is True
    assert [e["reason"] for e in waits["events"]] == ["Scheduled"]
    assert_offline_agrees(run.stack, CLUSTER, "kl-silent", run.tmp)


def test_a_running_pods_node_lost_then_the_noexecute_eviction(run: Run) -> None:
    grace = 40 + 5 + 5 + TOLERATION_S  # node monitor grace + period + NoExecute + toleration
    views = settle(run, "kl-lost", verdicts("evicted"), grace + 90)
    fragile = views["fragile"]
    assert answer(fragile) == EXPECTED["kl-lost"]["fragile"]
    assert fragile["milestones"]["running"] is not None
    assert fragile["milestones"]["deleted"] is None  # Terminating: no kubelet to finish it
    assert "TaintManagerEviction" in [e["reason"] for e in fragile["events"]]
    assert_offline_agrees(run.stack, CLUSTER, "kl-lost", run.tmp)


def test_a_node_deleted_under_a_running_pod_is_podgc_deleted(run: Run) -> None:
    # PodGC (v1.20): the node name quarantined 40 s, then the next 20 s tick.
    views = settle(run, "kl-gone", verdicts("podgc-deleted"), 40 + 20 + 60)
    orphan = views["orphan"]
    assert answer(orphan) == EXPECTED["kl-gone"]["orphan"]
    assert orphan["node_exists"] is False
    assert orphan["milestones"]["running"] is not None
    assert "was deleted while the pod was on it" in orphan["explanation"]
    assert_offline_agrees(run.stack, CLUSTER, "kl-gone", run.tmp)
