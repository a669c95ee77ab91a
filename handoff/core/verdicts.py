"""Verdict and stage names, their order and colours: defined once, used everywhere.

The CLI, the JSON API and every page take names and colours from here so a
verdict looks the same wherever an operator meets it.
"""

from __future__ import annotations

from dataclasses import dataclass

UNSCHEDULED = "unscheduled"
AWAITING_KUBELET = "awaiting-kubelet"
STARTING = "starting"
RUNNING = "running"
SUCCEEDED = "succeeded"
STUCK = "stuck"
STUCK_TERMINATING = "stuck-terminating"
REJECTED = "rejected"
PODGC_DELETED = "podgc-deleted"
EVICTED = "evicted"
NODE_LOST = "node-lost"
FAILED = "failed"
DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class Verdict:
    name: str
    severity: int  # higher is worse: the triage table sorts on it
    colour: str  # hex, readable on light and dark backgrounds
    attention: bool  # shown on the triage board's "needs attention" table
    summary: str


VERDICTS: dict[str, Verdict] = {
    v.name: v
    for v in (
        Verdict(STUCK, 90, "#d62728", True, "bound but not running for too long"),
        Verdict(
            STUCK_TERMINATING,
            87,
            "#7e57c2",
            True,
            "deleted, still there long after its grace period",
        ),
        Verdict(PODGC_DELETED, 85, "#8c1c8c", True, "force-deleted by the PodGC controller"),
        Verdict(REJECTED, 80, "#e8590c", True, "refused by kubelet admission"),
        Verdict(NODE_LOST, 75, "#b8860b", True, "its node stopped reporting during the handoff"),
        Verdict(EVICTED, 70, "#c2185b", True, "evicted from its node"),
        Verdict(FAILED, 60, "#a0522d", False, "ran and failed"),
        Verdict(AWAITING_KUBELET, 50, "#f0a30a", True, "bound, waiting for the kubelet"),
        Verdict(UNSCHEDULED, 40, "#7f7f7f", True, "no node chosen yet"),
        Verdict(STARTING, 30, "#1f77b4", False, "kubelet is starting it"),
        Verdict(DELETED, 20, "#6c757d", False, "deleted by a person or a controller"),
        Verdict(RUNNING, 10, "#2ca02c", False, "running"),
        Verdict(SUCCEEDED, 5, "#17becf", False, "completed successfully"),
    )
}

VERDICT_NAMES: tuple[str, ...] = tuple(VERDICTS)

BINDINGS: tuple[str, ...] = ("scheduler", "manual", "static", "unknown")

MILESTONES: tuple[str, ...] = (
    "created",
    "bound",
    "kubelet_ack",
    "admitted",
    "rejected",
    "sandbox_ready",
    "initialized",
    "containers_started",
    "running",
    "ready",
    "finished",
    "deleted",
)

# A pod's recorded changes carry a bit per milestone reached, and these flags above them.
DELETING_BIT = 1 << 20
DISRUPTION_BIT = 1 << 21


@dataclass(frozen=True, slots=True)
class Stage:
    name: str
    label: str
    colour: str
    starts: tuple[str, ...]  # first milestone present opens the stage
    ends: tuple[str, ...]  # first of these after the start closes it


# A stage runs from its start milestone to the earliest later milestone among
# its ends (or the deletion, or "now"). Stages whose start never happened are
# absent from a pod's timeline.
STAGES: tuple[Stage, ...] = (
    Stage("scheduling", "scheduling", "#9e9e9e", ("created",), ("bound",)),
    Stage("awaiting-kubelet", "awaiting kubelet", "#f0a30a", ("bound",), ("kubelet_ack",)),
    Stage("admission", "kubelet admission", "#ffb74d", ("kubelet_ack",), ("admitted", "rejected")),
    Stage("sandbox", "sandbox & network", "#90caf9", ("admitted",), ("sandbox_ready",)),
    Stage(
        "image-pull",
        "init & image pull",
        "#64b5f6",
        ("sandbox_ready",),
        ("initialized", "containers_started"),
    ),
    Stage("starting", "starting containers", "#1e88e5", ("initialized",), ("running",)),
    Stage("running", "running", "#2ca02c", ("running",), ("finished",)),
    Stage("terminal", "terminated", "#6c757d", ("finished", "rejected"), ()),
)

DURATIONS: tuple[tuple[str, str, str], ...] = (
    ("create_to_bind", "created", "bound"),
    ("bind_to_ack", "bound", "kubelet_ack"),
    ("ack_to_running", "kubelet_ack", "running"),
    ("bind_to_running", "bound", "running"),
    ("create_to_running", "created", "running"),
    ("create_to_ready", "created", "ready"),
)

# Kubelet admission (pkg/kubelet/lifecycle/predicate.go and friends): the
# reasons it puts on a pod it refuses. OutOf<resource> is matched by prefix.
ADMISSION_REASONS = frozenset(
    {
        "NodeAffinity",
        "NodeName",
        "NodePorts",
        "TaintToleration",
        "UnexpectedAdmissionError",
        "InvalidNodeInfo",
        "PodOSNotSupported",
        "PodOSSelectorNodeLabelDoesNotMatch",
        "NodeShutdown",
        "SysctlForbidden",
        "UnknownReason",
        # Newer kubelets (admissionRejectionReasons, pkg/kubelet/kubelet.go): topology
        # manager (1.18+), sidecar restartPolicy (1.28+), supplemental groups policy
        # (1.31+), AppArmor as a hard check (1.30+).
        "TopologyAffinityError",
        "InitContainerRestartPolicyForbidden",
        "SupplementalGroupsPolicyNotSupported",
        "UnexpectedPredicateFailureType",
        "AppArmor",
        # 2016-era predicate names, kept for old traces.
        "NodeSelectorMismatching",
        "PodFitsHostPorts",
        "HostPortConflict",
    }
)
REJECTION_PREFIX = "Pod was rejected: "  # 1.26+ (PR #112644)
LEGACY_REJECTION_PREFIX = "Pod "  # 1.25 and earlier: rejectPod's "Pod " + message
# The eviction manager refusing a pod at admission (eviction_manager.go Admit), as
# opposed to evicting a running one ("The node was low on resource: ...").
ADMISSION_EVICTION = "The node had condition:"


def is_admission_reason(reason: str | None) -> bool:
    return bool(reason) and (reason.startswith("OutOf") or reason in ADMISSION_REASONS)


def severity(verdict: str) -> int:
    return VERDICTS[verdict].severity


def colour(verdict: str) -> str:
    return VERDICTS[verdict].colour
