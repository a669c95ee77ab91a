"""What a Kubernetes release changes in the simulated cluster (``simulate --k8s-version``).

Each entry names the release it belongs to and the upstream change (FIDELITY_AUDIT.md's
version key). Without a version the simulator keeps its defaults (``ClusterConfig``).
"""

from __future__ import annotations

from dataclasses import replace

from handoff.sim.cluster import ClusterConfig
from handoff.sim.components.kubelet.state import minor_version

# The patch release a simulated node reports for a minor version (the newest we name).
PATCH = {"1.20": 2, "1.33": 1}
NEWEST = "1.33"


def kubelet_version(minor: str) -> str:
    """``v1.20.2`` for ``1.20``."""
    major, _, rest = minor.partition(".")
    if not (major.isdigit() and rest.isdigit()):
        raise ValueError(f"{minor!r}: a Kubernetes version is MAJOR.MINOR, e.g. 1.20")
    return f"v{minor}.{PATCH.get(minor, 0)}"


def configure(config: ClusterConfig, minor: str) -> ClusterConfig:
    """``config`` as a ``minor`` (e.g. ``1.20``) control plane and kubelets run it."""
    version = minor_version(minor)
    scheduler = replace(
        config.scheduler,
        # "had untolerated taint {k: v}" before 1.32 (pkg/scheduler/.../tainttoleration).
        legacy_taint_message=version < (1, 32),
        # v1.20's FailedScheduling texts and no preemption sentence (seen on v1.20.2;
        # releases between 1.21 and 1.31 get the later texts, not checked release by release).
        v1_20_texts=version <= (1, 20),
        # Unschedulable pods retried after 60 s at v1.20 (unschedulableQTimeInterval, seen
        # on v1.20.2: a retry that finds a node gone), 5 minutes in newer releases.
        unschedulable_flush=60.0 if version <= (1, 20) else config.scheduler.unschedulable_flush,
    )
    return replace(
        config,
        kubelet_version=kubelet_version(minor),
        # node-monitor-grace-period 40 s -> 50 s, PR #126287 (1.32).
        node_monitor_grace=50.0 if version >= (1, 32) else 40.0,
        # PodGC's DisruptionTarget and Failed phase, PodDisruptionConditions on by default
        # from 1.26; before, a bare Delete(grace 0) (pkg/controller/podgc/gc_controller.go).
        podgc_condition=version >= (1, 26),
        # The taint manager became its own taint-eviction-controller in 1.29.
        taint_eviction_component=(
            "taint-eviction-controller" if version >= (1, 29) else "taint-controller"
        ),
        scheduler=scheduler,
        # Every release's API server: MODIFIED with deletionTimestamp before DELETED.
        graceful_deletes=True,
        # The taint manager's DisruptionTarget came with PodDisruptionConditions (1.26).
        taint_disruption_condition=version >= (1, 26),
        # client-go's old recorder left reportingComponent/Instance empty: seen on v1.20.2
        # (manage.py fidelity); which later release fills them in is not pinned down here.
        legacy_event_reporting=version <= (1, 20),
        # node_lifecycle_controller.go recordNodeEvent: RegisteredNode/RemovingNode (every
        # release; seen on v1.20.2).
        node_controller_events=True,
        # NoSchedule, then NoExecute on the next 5 s pass: seen on v1.20.2 (assumed for
        # later releases, not checked).
        noexecute_next_pass=True,
    )
