"""Judging a folded pod: which verdict, and why, at a given time.

The most specific cause wins: a deletion's cause (PodGC, an eviction), an admission
rejection, a lost node, then the phase, then where the handoff stands.
"""

from __future__ import annotations

from dataclasses import dataclass

from handoff.core import verdicts as v
from handoff.core.podstate import (
    ACK,
    ADMITTED,
    BOUND,
    CREATED,
    DELETED,
    FINISHED,
    FIRST_SCHEDULED_COND,
    FIRST_SEEN_FRESH,
    HAS_OBJECT,
    NEVER_READY,
    NO_EXTRA,
    REJECTED,
    RUNNING,
    SAW_UNBOUND,
    SCHEDULED_EVENT,
    STATIC,
    NodeState,
    PodExtra,
    PodState,
)

# DisruptionTarget reasons (pkg/apis/core/types.go) that mean "evicted".
EVICTION_DISRUPTIONS = frozenset(
    {
        "DeletionByTaintManager",
        "EvictionByEvictionAPI",
        "PreemptionByScheduler",
        "PreemptionByKubeScheduler",
        "TerminationByKubelet",
    }
)
PODGC_MESSAGES = {
    "PodGC: node no longer exists": "orphaned",
    "PodGC: node is out-of-service": "out-of-service",
    "PodGC: terminating pod on out-of-service node": "out-of-service",
}
# GKE's gcp-controller-manager force-deletes the pods of deleted nodes itself, PodGC's
# way (cloud-provider-gcp, outside the Kubernetes tree; GKE 1.26+ with DisruptionTarget).
GCP_NODE_GC = "DeletionByGCPControllerManager"
# The kubelet's own reasons for ending a pod it was running (pod status.reason):
# node-pressure eviction (eviction_manager.go, every version), graceful node shutdown
# ("Shutdown" 1.20, "Terminated" 1.21+: nodeshutdown_manager_linux.go) and making room
# for a critical pod (preemption.go). From 1.26 a DisruptionTarget TerminationByKubelet
# comes with them; before, the reason is all there is.
KUBELET_TERMINATIONS = frozenset({"Evicted", "Terminated", "Shutdown", "Preempting"})
PODGC_PERIOD = 20.0
PODGC_QUARANTINE = 40.0


@dataclass(slots=True)
class Judgement:
    verdict: str
    reason: str | None
    node_exists: bool | None
    podgc_window: tuple[float, float] | None = None
    node_lost_at: float | None = None


class Judging:
    """The verdict side of ``Timeline``, a mixin: ``timeline.judge(pod, now)`` is one
    method call, as before the split, and the fold's hot path is untouched."""

    nodes: dict[str, NodeState]
    nodes_known: bool

    def node_exists(self, name: str, at: float | None = None) -> bool | None:
        """Whether a node object exists (at a time); None when no nodes were watched."""
        if not self.nodes_known:
            return None
        node = self.nodes.get(name)
        if node is None or (not node.exists and node.deleted is None):
            return False
        if node.deleted is not None:
            return at is not None and at < node.deleted
        return True

    def judge(self, pod: PodState, now: float, stuck_after: float = 60.0) -> Judgement:
        """The verdict for one pod at ``now``: the most specific cause wins."""
        m = pod.milestones
        x = pod.extra or NO_EXTRA  # the rare facts, read directly: judged for every pod
        exists = self.node_exists(pod.node, m[DELETED]) if pod.node else None
        deadline = x.deletion_deadline
        if deadline is not None and m[DELETED] is None and now > deadline + stuck_after:
            why = self._terminating_reason(pod, x, exists)
            return Judgement(v.STUCK_TERMINATING, why, exists)
        cause = self._deletion_cause(pod, x, exists)
        if cause is not None:
            return Judgement(cause[0], cause[1], exists)
        if x.rejection is not None or m[REJECTED] is not None:
            reason = x.rejection[0] if x.rejection else pod.status_reason or None
            return Judgement(v.REJECTED, reason, exists)
        if x.evicted_event is not None and m[ADMITTED] is None and m[RUNNING] is None:
            return Judgement(v.REJECTED, "Evicted", exists)
        lost_at = self._node_lost_at(pod, x, now)
        if lost_at is not None:
            return Judgement(v.NODE_LOST, "NodeNotReady", exists, node_lost_at=lost_at)
        if _deleted_before_it_finished(pod):
            return Judgement(v.DELETED, None, exists)
        phase = pod.phase
        if phase == "Succeeded":
            return Judgement(v.SUCCEEDED, None, exists)
        if phase == "Failed":
            return Judgement(v.FAILED, pod.status_reason or x.terminated or None, exists)
        if phase == "Running" or (not pod.flags & HAS_OBJECT and pod.started_event is not None):
            return Judgement(v.RUNNING, pod.waiting or x.event_waiting or None, exists)
        if not pod.node and m[BOUND] is None:
            return Judgement(v.UNSCHEDULED, x.unschedulable or None, exists)
        return self._judge_handoff(pod, x, now, stuck_after, exists)

    def turning_points(self, pod: PodState, stuck_after: float = 60.0) -> list[float]:
        """The times at which ``judge(pod, now)`` may change as ``now`` passes them, the
        pod and its node staying as they are: between two of them (a margin apart) the
        judgement is the same. A superset of ``judge``'s tests of ``now``: a deletion
        deadline passed by ``stuck_after``, a down interval of its node started (for a
        pod not deleted), its binding older than ``stuck_after``. Keep in step with
        ``judge``: a replay reuses judgements between these points (offline/judging.py)."""
        m = pod.milestones
        points = []
        if m[DELETED] is None:
            deadline = (pod.extra or NO_EXTRA).deletion_deadline
            if deadline is not None:
                points.append(deadline + stuck_after)
            node = self.nodes.get(pod.node) if pod.node else None
            if node is not None:
                points.extend(start for start, _stop, _why in node.down)
        bound = next((t for t in (m[BOUND], m[CREATED], m[ACK]) if t is not None), None)
        if bound is not None:
            points.append(bound + stuck_after)
        return points

    def _judge_handoff(
        self, pod: PodState, x: PodExtra, now: float, stuck_after: float, exists: bool | None
    ) -> Judgement:
        m = pod.milestones
        bound = next((t for t in (m[BOUND], m[CREATED], m[ACK]) if t is not None), None)
        late = bound is not None and now - bound > stuck_after
        if exists is False:
            window = self.podgc_window(pod)
            verdict = v.STUCK if late else v.AWAITING_KUBELET
            return Judgement(verdict, "node-missing", exists, podgc_window=window)
        if m[ACK] is None:
            if late:
                return Judgement(v.STUCK, "kubelet-silent", exists)
            return Judgement(v.AWAITING_KUBELET, None, exists)
        waiting = pod.waiting or x.event_waiting or None
        if late:
            return Judgement(v.STUCK, waiting or "not-running", exists)
        return Judgement(v.STARTING, waiting, exists)

    def _deletion_cause(
        self, pod: PodState, x: PodExtra, exists: bool | None
    ) -> tuple[str, str] | None:
        m = pod.milestones
        disruption = x.disruption or ("", "")
        if disruption[0] == "DeletionByPodGC":
            return v.PODGC_DELETED, PODGC_MESSAGES.get(disruption[1], disruption[0])
        if disruption[0] == GCP_NODE_GC:
            return v.PODGC_DELETED, GCP_NODE_GC
        if (
            pod.phase == "Failed"
            and pod.status_reason in KUBELET_TERMINATIONS
            and x.rejection is None
        ):  # the kubelet's own word beats TerminationByKubelet
            return v.EVICTED, pod.status_reason
        if disruption[0] in EVICTION_DISRUPTIONS:
            return v.EVICTED, disruption[0]
        if x.taint_eviction is not None:
            return v.EVICTED, "TaintManagerEviction"
        if x.evicted_event is not None and (m[ADMITTED] is not None or m[RUNNING] is not None):
            return v.EVICTED, "Evicted"
        if (
            m[DELETED] is not None
            and pod.node
            and exists is False
            and (m[ACK] is None or _forced_after_its_node(pod))
        ):
            return v.PODGC_DELETED, "orphaned"
        return None

    def _terminating_reason(self, pod: PodState, x: PodExtra, exists: bool | None) -> str:
        """Why a deletion has not finished, as far as the streams tell."""
        if exists is False:
            return "node-missing"
        node = self.nodes.get(pod.node) if pod.node else None
        if node is not None and node.down and node.down[-1][1] is None:
            return "node-not-ready"
        if x.finalizers and (not pod.node or pod.milestones[FINISHED] is not None):
            return "finalizers"  # the kubelet is done (or never had it): they hold it
        requested = pod.deletion_requested
        if pod.node and requested is not None and pod.last_change <= requested:
            return "kubelet-silent"  # nothing from the kubelet since the request
        return "finalizers" if x.finalizers else "terminating"

    def _node_lost_at(self, pod: PodState, x: PodExtra, now: float) -> float | None:
        m = pod.milestones
        if m[RUNNING] is not None or pod.phase in ("Running", "Succeeded") or not pod.node:
            return None
        bound = m[BOUND] if m[BOUND] is not None else m[CREATED]
        if bound is None:
            return None
        end = m[DELETED] if m[DELETED] is not None else now
        candidates = [x.node_not_ready] if x.node_not_ready is not None else []
        node = self.nodes.get(pod.node)
        if node is not None:
            for start, stop, why in node.down:
                if why != NEVER_READY and start <= end and (stop is None or stop >= bound):
                    candidates.append(max(start, bound))
        return min(candidates) if candidates else None

    def podgc_window(self, pod: PodState) -> tuple[float, float] | None:
        """When PodGC will force-delete a pod bound to a missing node: it notices on
        a 20 s tick, quarantines the node name for 40 s, deletes on a later tick."""
        m = pod.milestones
        base = m[CREATED] if m[CREATED] is not None else m[BOUND]
        node = self.nodes.get(pod.node)
        if node is not None and node.deleted is not None:
            base = max(base or node.deleted, node.deleted)
        if base is None:
            return None
        return base + PODGC_QUARANTINE, base + PODGC_QUARANTINE + 2 * PODGC_PERIOD

    def binding(self, pod: PodState) -> str | None:
        """scheduler | manual | static | unknown, None while unbound."""
        flags = pod.flags
        if flags & STATIC:
            return "static"
        if flags & SCHEDULED_EVENT or (flags & SAW_UNBOUND and pod.node):
            return "scheduler"
        if not pod.node:
            return None
        if flags & FIRST_SEEN_FRESH == FIRST_SEEN_FRESH:
            return "scheduler" if flags & FIRST_SCHEDULED_COND else "manual"
        return "unknown"


def _forced_after_its_node(pod: PodState) -> bool:
    """A pod the kubelet had, deleted once its node was gone and before the kubelet ended
    it: only PodGC deletes those (gcOrphaned, pkg/controller/podgc/gc_controller.go; a
    graceful delete asked for earlier is finished by it too, no kubelet being left). Before
    1.26 it writes no status and no event; from 1.26 DisruptionTarget says so directly."""
    return pod.milestones[FINISHED] is None


def _deleted_before_it_finished(pod: PodState) -> bool:
    """A deletion caused the end (a person, a controller) rather than following it."""
    asked = pod.deletion_requested or pod.milestones[DELETED]
    if asked is None:
        return False
    finished = pod.milestones[FINISHED]
    return finished is None or asked <= finished
