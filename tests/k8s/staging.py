"""The situations of test_situations.py and test_kubelet_situations.py, staged together
once per run of the k8s tests (the ``staging`` fixture, tests/k8s/conftest.py).

What they wait for is the real controllers' clocks, not CPU: PodGC's 40 s quarantine and
20 s tick, the node lifecycle controller's 40 s grace period plus a pod's
tolerationSeconds. Staged at once, each on its own nodes and namespaces and watched as
its own cluster, those clocks run side by side and while the k8s tests ordered between
the staging and the situations' tests (test_attach_kubelets.py) run; each test then
asserts only its own situation.

Two orderings matter, and the conftest keeps them: test_faults.py runs before (it restarts
the API server and stops the workers, which would blind these clusters), and no other
node registers before situation (c)'s first FailedScheduling, whose message counts the
nodes (``situations.stage`` returns once it is written).
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.core.management import call_command
from django.test import override_settings
from kubernetes import client as k8s

from devtools.controlplane import ControlPlane
from handoff.attach.run import Attached
from tests.k8s import kubelet_situations
from tests.k8s import situations as s
from tests.k8s.nodes import NodeAgent
from tests.k8s.stack import Stack

SITUATIONS = "real"  # test_situations.py's cluster
KUBELETS = "kubelets"  # test_kubelet_situations.py's


@dataclass
class Situations:
    staged: s.Staged
    audit_from: int  # audit.log's size before the cluster was added


@dataclass
class Staging:
    """What was staged (None: its test module is not in the run)."""

    situations: Situations | None = None
    kubelets: Attached | None = None


@contextlib.contextmanager
def staged(
    stack: Stack,
    plane: ControlPlane,
    admin: k8s.ApiClient,
    agent: NodeAgent,
    reader_kubeconfig: Path,
    *,
    situations: bool,
    kubelets: bool,
) -> Iterator[Staging]:
    """Each cluster added (its streams listed) before its objects are created, then its
    situations staged. On exit (after the last k8s test) the kubelets stop and the
    situations' recording is written when asked for; the clusters go with the stack."""
    staging = Staging()
    with contextlib.ExitStack() as cleanup:
        if situations:
            audit = plane.directory / "audit.log"
            audit_from = audit.stat().st_size if audit.exists() else 0
            stack.add_cluster(SITUATIONS, reader_kubeconfig)
            cleanup.callback(_record_situations, stack)
            staging.situations = Situations(s.stage(admin, agent), audit_from)
        if kubelets:
            stack.add_cluster(KUBELETS, reader_kubeconfig)
            core = k8s.CoreV1Api(admin)
            staging.kubelets = cleanup.enter_context(kubelet_situations.staged(core, plane))
        yield staging


def _record_situations(stack: Stack) -> None:
    keep = os.environ.get("HANDOFF_K8S_RECORD")
    if keep:  # refreshes tests/data/k8s-v1.20.2/situations.jsonl.gz (docs/real-control-plane.md)
        with override_settings(REDIS_URL=stack.redis_url):
            call_command("record", SITUATIONS, "--out", keep, stdout=io.StringIO())
