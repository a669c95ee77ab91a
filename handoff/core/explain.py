"""Plain-language explanations of verdicts, with the remedy an operator can act on.

The wording follows the seed documents (shared/seeds): what happened, why the
cluster behaves that way, and the command or change that fixes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from handoff.core import verdicts as v


@dataclass(slots=True)
class Context:
    node: str = ""
    binding: str | None = None
    message: str = ""
    resources: dict[str, Any] | None = None
    owner_kind: str = ""
    since_bound: float | None = None
    podgc_from: str = ""
    podgc_to: str = ""
    node_lost_at: str = ""
    acked: bool = False  # a kubelet had the pod
    ran: bool = False  # it was Running at some point
    finalizers: tuple[str, ...] = ()
    deletion_deadline: str = ""


RECREATE = (
    "the pod will not restart or move: delete it and create it again"
    " (a controller does so by itself)"
)


def explain(verdict: str, reason: str | None, ctx: Context) -> str:
    """One paragraph: what happened and what to do about it."""
    handler = _HANDLERS.get(verdict)
    text = handler(reason or "", ctx) if handler else v.VERDICTS[verdict].summary
    if ctx.binding == "manual" and ctx.owner_kind == "ReplicaSet":
        text += (
            " Note: spec.nodeName is set in the workload's pod template, so every replica is"
            " pinned to one node and skips the scheduler; use nodeSelector or nodeAffinity."
        )
    return text


def _unscheduled(reason: str, ctx: Context) -> str:
    if reason == "SchedulingGated":
        return (
            "The pod has spec.schedulingGates (beta 1.27, GA 1.30): the scheduler does not"
            " look at it until every gate is removed, by whoever added it (Kueue, a batch"
            " queue or another admission controller). Check `kubectl get pod -o"
            " jsonpath='{.spec.schedulingGates}'` and that controller's queue; capacity and"
            " affinity do not matter yet."
        )
    if reason:
        detail = f" The scheduler says: {ctx.message}" if ctx.message else ""
        return (
            "No node fits this pod yet, so the scheduler has not bound it." + detail + " Adjust"
            " its requests, nodeSelector/affinity or tolerations, or add capacity; the"
            " scheduler retries by itself."
        )
    return (
        "No node has been chosen yet. If this lasts, check that a scheduler named in"
        " spec.schedulerName is running."
    )


def _awaiting(reason: str, ctx: Context) -> str:
    if reason == "node-missing":
        return _node_missing(ctx)
    return (
        f"Bound to node {ctx.node}; the kubelet there has not acknowledged it yet. This"
        " normally takes well under a second."
    )


def _stuck(reason: str, ctx: Context) -> str:
    ago = f" {ctx.since_bound:.0f} s ago" if ctx.since_bound is not None else ""
    if reason == "node-missing":
        return _node_missing(ctx)
    if reason == "kubelet-silent":
        return (
            f"Bound to node {ctx.node}{ago}, but the kubelet on {ctx.node} has written no"
            " status and no event for it: a stale binding. The kubelet may be hung or"
            " stopped while the node object still exists. Check `kubectl describe node"
            f" {ctx.node}` and the kubelet's log on the node (journalctl -u kubelet). The pod"
            " stays Pending with a nodeName until that kubelet recovers or the node is removed."
        )
    advice = _WAITING_ADVICE.get(reason.removeprefix("Init:"), _WAITING_ADVICE["not-running"])
    since = f" {ctx.since_bound:.0f} s after binding" if ctx.since_bound is not None else ""
    return (
        f"The kubelet on {ctx.node} admitted the pod, but it has not reached Running{since}:"
        f" {reason}. {advice}"
    )


def _node_missing(ctx: Context) -> str:
    window = (
        f" PodGC force-deletes it between {ctx.podgc_from} and {ctx.podgc_to}"
        " (40-80 s after creation), without a single event."
        if ctx.podgc_from
        else " PodGC force-deletes such pods 40-80 s after creation, without a single event."
    )
    return (
        f"spec.nodeName is {ctx.node!r}, but no node of that name exists. The scheduler ignores"
        " pods whose nodeName is already set and no kubelet watches that name, so nothing will"
        " ever start it." + window + " Compare the manifest's nodeName with `kubectl get nodes`"
        " (a typo, or a manifest copied from another cluster); nodeName cannot be changed on a"
        " live pod: delete it and recreate it with the right name, or use nodeSelector."
    )


def _rejected(reason: str, ctx: Context) -> str:
    node = ctx.node or "its node"
    res = ctx.resources
    if res:
        detail = (
            f" Not enough {res['resource']}: requested {res['requested']}, already used"
            f" {res['used']}, capacity {res['capacity']}"
            f"{' (millicores)' if res['resource'] == 'cpu' else ''}."
        )
    elif ctx.message:
        detail = f" The kubelet said: {ctx.message}."
    else:
        detail = ""
    why = (
        " spec.nodeName skips the scheduler's checks, but the kubelet still checks resources"
        " and nodeSelector itself."
        if ctx.binding == "manual"
        else " The node's state changed after the scheduler chose it (or the kubelet counts"
        " resources differently), and the kubelet has the last word."
        if ctx.binding == "scheduler"
        else ""
    )
    fix = _REJECTION_FIX.get(reason, "")
    if reason.startswith("OutOf"):
        fix = " Lower the pod's requests or choose a node with room."
    if ctx.ran:
        return (
            f"The kubelet on {node} had been running this pod, then refused it when it admitted"
            f" it again ({reason}): a kubelet restart re-admits every pod, and a node label,"
            " taint or allocatable change since the pod started makes it fail the checks (from"
            " 1.31 the kubelet skips the checks that can be ignored on a restart)."
            f"{detail}{fix} This is final: {RECREATE}."
        )
    return (
        f"The kubelet on {node} refused the pod at admission ({reason}), so it went straight to"
        f" Failed.{detail}{why}{fix} This is final: {RECREATE}."
    )


def _podgc(reason: str, ctx: Context) -> str:
    if reason == "DeletionByGCPControllerManager" or (reason == "orphaned" and ctx.acked):
        who = (
            "On GKE, gcp-controller-manager (PodGC's counterpart there)"
            if reason != "orphaned"
            else "The PodGC controller"
        )
        return (
            f"{who} force-deleted this pod because its node {ctx.node!r} was deleted while the"
            " pod was on it: a node removed by the cluster autoscaler, a spot/preemptible"
            " reclaim, an upgrade or `kubectl delete node`. The pod itself was fine; a"
            " controller recreates it elsewhere, a bare pod is gone. Check why the node went"
            " (`kubectl get events --field-selector involvedObject.kind=Node`, the cloud"
            " provider's activity log) and give workloads that must survive it a"
            " PodDisruptionBudget and more than one replica."
        )
    if reason == "orphaned":
        return (
            f"The PodGC controller force-deleted this pod because its node {ctx.node!r} does not"
            ' exist. It emits no event; only kube-controller-manager logs "PodGC is force'
            ' deleting Pod". From the outside it looks like the pod was created and vanished.'
            " Compare spec.nodeName in the manifest with `kubectl get nodes` and recreate the"
            " pod with a node that exists, or use nodeSelector/nodeAffinity instead."
        )
    return f"The PodGC controller deleted this pod ({reason})."


def _evicted(reason: str, ctx: Context) -> str:
    if reason in ("TaintManagerEviction", "DeletionByTaintManager"):
        return (
            f"Node {ctx.node} got a NoExecute taint the pod does not tolerate (or tolerates only"
            " for tolerationSeconds), so the taint-eviction controller deleted it. spec.nodeName"
            " does not bypass NoExecute taints. Check `kubectl describe node"
            f" {ctx.node}` for its taints; add a toleration only if the pod really belongs there."
        )
    if reason == "Evicted":
        return (
            f"The kubelet on {ctx.node} evicted the pod under node pressure: {ctx.message or '?'}"
            " Free the resource on the node or set requests/limits so the pod is not first in"
            " line; a controller recreates evicted pods elsewhere."
        )
    if reason in ("Terminated", "Shutdown"):
        return (
            f"Node {ctx.node} shut down (graceful node shutdown: a spot reclaim, a maintenance"
            " event or a reboot), and its kubelet terminated the pod first. Nothing is wrong"
            ' with the pod; a controller recreates it elsewhere. The reason is "Shutdown" on'
            ' 1.20 and "Terminated" from 1.21; from 1.26 a DisruptionTarget'
            " TerminationByKubelet comes with it."
        )
    if reason == "Preempting":
        return (
            f"The kubelet on {ctx.node} stopped this pod to make room for a critical pod"
            " (system-node-critical or system-cluster-critical) it had to admit. Give the node"
            " room for its critical pods, or this pod a PriorityClass; a controller recreates"
            " it elsewhere."
        )
    if reason == "EvictionByEvictionAPI":
        return "Evicted through the eviction API (a drain or an autoscaler)."
    if reason.startswith("Preemption"):
        return "Preempted by the scheduler to make room for a higher-priority pod."
    return f"Evicted from node {ctx.node} ({reason})."


def _node_lost(reason: str, ctx: Context) -> str:
    at = f" at {ctx.node_lost_at}" if ctx.node_lost_at else ""
    return (
        f"Node {ctx.node} stopped reporting{at}, after this pod was bound to it and before it"
        " ran. The node lifecycle controller marks the node NotReady/Unknown and taints it;"
        " pods are evicted after their tolerationSeconds (300 s by default) and a controller"
        f" creates replacements elsewhere, while a bare pod is lost. Check `kubectl describe node"
        f" {ctx.node}` and the machine itself."
    )


def _stuck_terminating(reason: str, ctx: Context) -> str:
    by = f" (its grace period ended at {ctx.deletion_deadline})" if ctx.deletion_deadline else ""
    head = f"The pod was deleted but is still there long after its grace period{by}. "
    node = ctx.node or "its node"
    if reason in ("node-missing", "node-not-ready"):
        where = "no longer exists" if reason == "node-missing" else "is NotReady/unreachable"
        return head + (
            f"Node {node} {where}, so no kubelet can confirm the containers stopped, and the"
            " API server keeps the pod until one does. `kubectl delete pod --grace-period=0"
            " --force` is safe once you know the machine is off (or gone): check it first. For a"
            " StatefulSet pod on a node that is only cut off, forcing it can run two pods with"
            " one identity; instead shut the machine down and add the taint"
            " node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (GA 1.28), or delete the"
            " Node object, and Kubernetes cleans up by itself."
        )
    if reason == "finalizers":
        names = ", ".join(ctx.finalizers) or "see metadata.finalizers"
        return head + (
            f"The kubelet is done with it, but finalizers hold it: {names}. The controller that"
            " owns each finalizer removes it when its cleanup is done: check that controller"
            " (a missing CRD controller or operator is the usual cause). `--force` does not"
            " help: finalizers outlive a forced delete. Patch them out (`kubectl patch pod"
            ' <pod> -p \'{"metadata":{"finalizers":null}}\'`) only if that controller is gone'
            " for good and its cleanup does not matter."
        )
    if reason == "kubelet-silent":
        return head + (
            f"The kubelet on {node} has said nothing about it since the deletion, while the"
            f" node looks Ready: it may be hung. Check `kubectl describe node {node}` and the"
            " kubelet's log (journalctl -u kubelet). Do not `--force` yet: the containers may"
            " still run on the node, and a forced delete only forgets them."
        )
    return head + (
        f"The kubelet on {node} is still stopping it: a preStop hook or a container ignoring"
        " SIGTERM, a volume that will not unmount or detach, or the runtime hanging. See the"
        " pod's events and the kubelet's log; `--force` is safe only once the containers are"
        " gone from the node (crictl ps)."
    )


def _failed(reason: str, ctx: Context) -> str:
    why = f" ({reason})" if reason else ""
    return (
        f"The kubelet admitted and ran the pod, and it failed{why}. The handoff worked; look at"
        " the container: `kubectl logs <pod> --previous` and `kubectl describe pod`."
    )


def _simple(verdict: str) -> Any:
    def handler(reason: str, ctx: Context) -> str:
        # Only this verdict's text is formatted (every pod of a report comes here).
        if verdict == v.RUNNING:
            text = f"Running on {ctx.node}: the handoff is complete."
        elif verdict == v.SUCCEEDED:
            text = "Completed successfully: the handoff is complete."
        elif verdict == v.STARTING:
            text = f"The kubelet on {ctx.node} has it and is starting its containers."
        elif verdict == v.DELETED:
            text = "Deleted by a person or a controller before it finished."
        else:
            raise KeyError(verdict)
        if reason and verdict in (v.RUNNING, v.STARTING):
            text += f" A container is waiting: {reason}."
        return text

    return handler


_WAITING_ADVICE = {
    "ImagePullBackOff": "The image cannot be pulled: check the image name and tag, the registry"
    " and imagePullSecrets (`kubectl describe pod` shows the pull error).",
    "ErrImagePull": "The image cannot be pulled: check the image name and tag, the registry and"
    " imagePullSecrets.",
    "CrashLoopBackOff": "A container keeps crashing: `kubectl logs <pod> --previous`.",
    "CreateContainerConfigError": "A ConfigMap or Secret the container refers to is missing.",
    "ContainerCreating": "Volumes, the sandbox or the image pull are slow: see the events.",
    "PodInitializing": "Init containers are still running or failing: see the events.",
    "FailedMount": "A volume cannot be mounted: see the FailedMount events for which one.",
    "FailedAttachVolume": "A volume cannot be attached to the node: see the events.",
    "not-running": "See the pod's events for what the kubelet is waiting on.",
}

_REJECTION_FIX = {
    "NodeAffinity": " The pod's nodeSelector/affinity does not match the node's labels: fix the"
    " selector or the nodeName, or drop nodeName and let the scheduler place it.",
    "TaintToleration": " The node has a NoExecute taint the pod does not tolerate.",
    "NodePorts": " A hostPort the pod asks for is already taken on that node.",
    "NodeName": " The pod's nodeName does not match the node that received it.",
    "UnexpectedAdmissionError": " A device plugin or admission handler failed on the node.",
}

_HANDLERS = {
    v.UNSCHEDULED: _unscheduled,
    v.AWAITING_KUBELET: _awaiting,
    v.STUCK: _stuck,
    v.STUCK_TERMINATING: _stuck_terminating,
    v.REJECTED: _rejected,
    v.PODGC_DELETED: _podgc,
    v.EVICTED: _evicted,
    v.NODE_LOST: _node_lost,
    v.FAILED: _failed,
    v.RUNNING: _simple(v.RUNNING),
    v.SUCCEEDED: _simple(v.SUCCEEDED),
    v.STARTING: _simple(v.STARTING),
    v.DELETED: _simple(v.DELETED),
}
