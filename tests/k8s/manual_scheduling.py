"""``manual-scheduling`` (seed 003) attached to a control plane of its own for
test_attach_scenarios.py, run in the background from the start of the k8s tests
(tests/k8s/conftest.py).

Its own control plane because the scenario cannot share one: its ``plain`` pod is placed
by the scheduler on whichever node is free (another test's node without a kubelet would
leave it Pending), and its three nodes would change the node count in situation (c)'s
FailedScheduling message; the API server restarts of test_faults.py would cut its
kubelets off.
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client as k8s

from devtools import controlplane
from handoff.attach.run import attach
from handoff.sim import Options, find_scenario

RUN_S = 40.0  # past the rejections at 30-32 s and the typo'd node at 40 s


def run(directory: Path, binaries: dict[str, Path]) -> dict[str, k8s.V1Pod]:
    """Start the control plane, run the scenario attached for RUN_S seconds, and return
    every pod it left, by name; the control plane is stopped before returning."""
    plane = controlplane.start(directory, binaries)
    try:
        attached = attach(
            find_scenario("manual-scheduling", None),
            Options(duration=RUN_S),
            str(plane.admin_kubeconfig),
        )
        attached.start()
        assert attached.wait(RUN_S + 60), "the attached run did not end"
        attached.stop()
        assert attached.error is None, attached.error
        with controlplane.admin_client(plane) as api:
            pods = k8s.CoreV1Api(api).list_pod_for_all_namespaces().items
        return {p.metadata.name: p for p in pods}
    finally:
        plane.stop()
