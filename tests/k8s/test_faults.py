"""Faults of the real API server itself, watched through the user's path: each ends with
nothing lost and the verdicts a fault-free run gives; while it lasts, ``/healthz`` and
``manage.py status`` name the cluster in one line, with no traceback in the worker.

- a real ``410 Gone``: the watchers stopped (a worker restart) while etcd compacted the
  version they stopped at (``--etcd-compaction-interval 3s``, the pods watch cache off:
  ``--watch-cache-sizes pods#0``), then resumed from it: relist and reconcile;
- the API server restarted mid-stream.

Both disturb every watcher of the control plane: they run before the situations are
staged (tests/k8s/conftest.py's ORDER). The cluster, its account and the checks are in
tests/k8s/faults.py; the kubeconfig's faults in test_credential_faults.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import orjson
import pytest

from devtools.controlplane import ControlPlane
from handoff.live import store
from tests.k8s.faults import (
    CLUSTER,
    COMPACTING,
    Faults,
    assert_no_tracebacks,
    assert_offline_agrees,
    assert_outage_reported,
    assert_recovered,
    expired,
    verdicts,
    views,
    watching_since,
)
from tests.k8s.stack import wait_for


@pytest.fixture(scope="module", autouse=True)
def _api_server_as_it_was(control_plane: ControlPlane, faults: Faults) -> Iterator[None]:
    """Whatever a failed test left: the worker running, the API server's own flags."""
    original = list(control_plane.apiserver_args)
    yield
    if "worker" not in faults.stack.procs:
        faults.stack.start_worker()
    if control_plane.apiserver_args != original:
        control_plane.restart_apiserver(down=0, extra_args=original)


def test_a_real_410_after_compaction_is_reconciled_by_a_relist(faults: Faults) -> None:
    stack, plane = faults.stack, faults.plane
    plane.restart_apiserver(down=0, extra_args=[*plane.apiserver_args, *COMPACTING])
    restarted = time.time()
    faults.create("kept")
    faults.create("gone-while-blind")
    wait_for(lambda: verdicts(stack), lambda v: len(v) == 2, 90, "both pods")
    # The restart's own failures, 410s and relists over: every stream watching again.
    wait_for(lambda: watching_since(stack, restarted), bool, 90, "the streams to watch again")
    stack.stop_worker()  # the streams checkpoint and stop: Handoff is blind from here
    try:
        with stack.client() as client:
            version = store.stream_state(client, CLUSTER, "pods")["rv"]
        faults.delete("gone-while-blind")
        faults.create("born-while-blind")
        wait_for(lambda: expired(plane, version), bool, 60, f"etcd to compact past {version}")
    finally:
        stack.start_worker()
    with stack.client() as client:
        final = wait_for(
            lambda: views(stack),
            lambda v: (
                v.get("gone-while-blind", {}).get("verdict") == "deleted"
                and "born-while-blind" in v
            ),
            90,
            "the relist to reconcile",
        )
        gone = [
            orjson.loads(raw)
            for _, raw in store.read_stream(client, CLUSTER)
            if b'"code":410' in raw and b'"ERROR"' in raw
        ]
        blind = [orjson.loads(b) for b in client.lrange(store.blind_key(CLUSTER), 0, -1)]
    assert gone, "no 410 reached the stream"
    assert any(b["stream"] == "pods" for b in blind)
    assert final["gone-while-blind"]["deleted_blind"]["stream"] == "pods"
    # What a watcher that never stopped would conclude:
    assert {n: (v["verdict"], v["reason"]) for n, v in final.items()} == {
        "kept": ("unscheduled", "Unschedulable"),
        "gone-while-blind": ("deleted", None),
        "born-while-blind": ("unscheduled", "Unschedulable"),
    }
    assert_offline_agrees(faults, "compaction")
    assert_no_tracebacks(faults)


def test_an_api_server_restart_is_an_outage_then_recovers_by_itself(faults: Faults) -> None:
    stack, plane = faults.stack, faults.plane
    faults.create("before")
    wait_for(lambda: verdicts(stack), lambda v: "before" in v, 60, "the first pod")
    plane.stop_apiserver()
    try:
        lines = assert_outage_reported(stack, "API unreachable")
    finally:
        plane.start_apiserver([a for a in plane.apiserver_args if a not in COMPACTING])
    assert lines
    faults.create("after")
    faults.delete("before")
    assert_recovered(faults)
    wait_for(
        lambda: verdicts(stack),
        lambda v: v.get("before") == "deleted" and v.get("after") == "unscheduled",
        60,
        "what happened after the restart",
    )
    assert_offline_agrees(faults, "restart")
    assert_no_tracebacks(faults)
