"""Deletions that never finish (issue 17 item 2): ``stuck-terminating``, on streams
shaped as the API server and the kubelet shape a deletion
(staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go
updateForGracefulDeletionAndFinalizers: a MODIFIED with deletionTimestamp = request +
grace, pkg/registry/core/pod/strategy.go CheckGracefulDelete; the DELETED only once the
kubelet confirms and the finalizers are gone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.core import verdicts as v
from handoff.core.trace import parse_time
from handoff.offline.triage import fold_trace
from tests.core.k8sshapes import Script, core_event, node, pod, running_status

TRACE = Path(__file__).parents[1] / "data" / "traces" / "stuck-terminating.jsonl"
TRACE_T0 = parse_time("2026-03-01T09:00:00Z")  # its time 0 (written with k8sshapes)


def _deleting(finalizers: list[str] | None = None) -> Script:
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("web-1", "u-web-1", 10, "worker-1", running_status(11)))
    return script.add(
        100,
        "MODIFIED",
        pod("web-1", "u-web-1", 10, "worker-1", running_status(11), 130, finalizers),
    )


def test_a_deletion_is_stuck_only_past_its_grace_period_and_the_margin():
    script = _deleting()

    assert script.view("web-1", at=150)["verdict"] == "deleted"
    assert script.view("web-1", at=189)["verdict"] == "deleted"
    late = script.view("web-1", at=191)
    assert (late["verdict"], late["reason"]) == ("stuck-terminating", "kubelet-silent")
    assert "Do not `--force` yet" in late["explanation"]


def test_the_schedulers_late_scheduled_event_is_no_news_from_the_kubelet():
    # Seen on v1.20.2: deleted the moment it was bound, the pod's Scheduled event (the
    # scheduler records it asynchronously) was observed after the deletion request.
    script = Script().add(0, "ADDED", node("worker-1", -1e5))
    script.add(10, "ADDED", pod("web-1", "u-web-1", 10, "worker-1", {"phase": "Pending"}))
    script.add(10.2, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", {"phase": "Pending"}, 40))
    scheduled = core_event(
        "web-1", "u-web-1", "Scheduled", "Successfully assigned default/web-1 to worker-1",
        10, component="default-scheduler",
    )  # fmt: skip
    script.add(10.4, "ADDED", scheduled)

    late = script.view("web-1", at=200)

    assert (late["verdict"], late["reason"]) == ("stuck-terminating", "kubelet-silent")


def test_a_kubelet_event_after_the_request_is_a_kubelet_at_work():
    script = _deleting()
    killing = core_event(
        "web-1", "u-web-1", "Killing", "Stopping container web", 101, host="worker-1"
    )
    script.add(101, "ADDED", killing)

    assert script.view("web-1", at=300)["reason"] == "terminating"


def test_a_deletion_that_finishes_is_never_stuck():
    script = _deleting()
    script.add(131, "DELETED", pod("web-1", "u-web-1", 10, "worker-1", running_status(11), 100))

    assert script.view("web-1", at=1000)["verdict"] == "deleted"


def test_a_kubelet_still_at_work_is_terminating():
    script = _deleting()
    waiting = running_status(11)
    waiting["containerStatuses"] = [{"state": {"waiting": {"reason": "ContainerCreating"}}}]
    script.add(120, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", waiting, 130))

    assert script.view("web-1", at=300)["reason"] == "terminating"


def test_a_node_that_is_gone_makes_force_safe():
    script = _deleting()
    script.add(140, "DELETED", node("worker-1", -1e5))

    view = script.view("web-1", at=300)

    assert (view["verdict"], view["reason"]) == ("stuck-terminating", "node-missing")
    assert "--force` is safe once you know the machine is off" in view["explanation"]
    assert "out-of-service" in view["explanation"]


def test_finalizers_are_named_and_force_is_said_not_to_help():
    script = _deleting(["example.com/cleanup"])
    done = running_status(11)
    done["phase"] = "Succeeded"
    script.add(
        125, "MODIFIED", pod("web-1", "u-web-1", 10, "worker-1", done, 130, ["example.com/cleanup"])
    )

    view = script.view("web-1", at=300)

    assert (view["verdict"], view["reason"]) == ("stuck-terminating", "finalizers")
    assert "example.com/cleanup" in view["explanation"]
    assert "`--force` does not help" in view["explanation"]


@pytest.mark.parametrize(
    ("at", "verdict"), [(380, "evicted"), (449, "evicted"), (460, "stuck-terminating")]
)
def test_a_taint_eviction_on_a_lost_node_becomes_stuck_terminating(at, verdict):
    """pkg/controller/nodelifecycle/scheduler/taint_manager.go (tainteviction 1.29+):
    the pod is deleted gracefully, but no kubelet is left to confirm it (N5)."""
    view = next(p for p in fold_trace(TRACE, at=TRACE_T0 + at)["pods"] if p["name"] == "api-0")

    assert view["verdict"] == verdict


def test_it_is_an_attention_verdict_between_stuck_and_podgc_deleted():
    ranked = sorted(v.VERDICTS, key=lambda name: -v.severity(name))

    assert ranked.index("stuck") + 1 == ranked.index("stuck-terminating")
    assert ranked.index("stuck-terminating") + 1 == ranked.index("podgc-deleted")
    assert v.VERDICTS["stuck-terminating"].attention
    assert v.colour("stuck-terminating") not in {
        x.colour for x in v.VERDICTS.values() if x.name != "stuck-terminating"
    }
