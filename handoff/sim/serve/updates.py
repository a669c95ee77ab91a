"""What an update may change, as the API server's validation says (``ValidatePodUpdate``,
``ValidateNodeUpdate``), and the checks on a posted workload's body."""

from __future__ import annotations

from typing import Any

from handoff.sim.components.apiserver import ApiError
from handoff.sim.objects import Obj


def workload_body(body: Obj, kind: str, namespace: str) -> tuple[str, Obj, Obj]:
    if body.get("kind", kind) != kind or not isinstance(body.get("spec"), dict):
        raise ApiError(400, "BadRequest", f"the body must be a {kind} with a spec")
    meta = body.get("metadata") or {}
    if meta.get("namespace", namespace) != namespace:
        raise ApiError(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        )
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ApiError(422, "Invalid", f"{kind} is invalid: metadata.name: Required value")
    return name, meta, body["spec"]


MUTABLE_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")
POD_UPDATE_FORBIDDEN = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
    "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be "
    "set to 1 if it was previously negative)"
)


def check_pod_update(old: Obj, spec: Any) -> None:
    """ValidatePodUpdate: only images, activeDeadlineSeconds, added tolerations and removed
    scheduling gates may change in a pod's spec."""
    name = old["metadata"]["name"]
    if not isinstance(spec, dict):
        raise ApiError(422, "Invalid", f'Pod "{name}" is invalid: spec: Required value')
    before = old["spec"]
    tolerations = spec.get("tolerations") or []
    if any(t not in tolerations for t in before.get("tolerations") or ()):
        raise ApiError(
            422, "Invalid", f'Pod "{name}" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}'
        )
    comparable = dict(spec, tolerations=before.get("tolerations"))
    for key in ("activeDeadlineSeconds", "schedulingGates"):
        comparable.pop(key, None)
    reference = {
        k: v for k, v in before.items() if k not in ("activeDeadlineSeconds", "schedulingGates")
    }
    if "tolerations" not in before:
        comparable.pop("tolerations", None)
    for kind in ("containers", "initContainers"):
        mine, theirs = comparable.get(kind), reference.get(kind)
        if isinstance(mine, list) and isinstance(theirs, list) and len(mine) == len(theirs):
            comparable[kind] = [
                dict(c, image=o.get("image")) if isinstance(c, dict) else c
                for c, o in zip(mine, theirs, strict=True)
            ]
    if comparable != reference:
        raise ApiError(
            422, "Invalid", f'Pod "{name}" is invalid: spec: Forbidden: {POD_UPDATE_FORBIDDEN}'
        )


def check_node_update(old: Obj, spec: Any) -> None:
    """Node specs are mutable (cordon, taints) but for podCIDR(s) and providerID once set."""
    name = old["metadata"]["name"]
    if not isinstance(spec, dict):
        raise ApiError(422, "Invalid", f'Node "{name}" is invalid: spec: Required value')
    for key in ("podCIDR", "podCIDRs", "providerID"):
        if key in old["spec"] and spec.get(key) != old["spec"][key]:
            raise ApiError(
                422,
                "Invalid",
                f'Node "{name}" is invalid: spec.{key}: Forbidden: may not be changed once set',
            )


def check_deployment_update(old: Obj, spec: Any) -> None:
    """apps/v1: the selector is immutable, replicas a count, the template a pod template."""
    name = old["metadata"]["name"]
    prefix = f'Deployment.apps "{name}" is invalid'
    if not isinstance(spec, dict):
        raise ApiError(422, "Invalid", f"{prefix}: spec: Required value")
    if spec.get("selector") != old["spec"].get("selector"):
        raise ApiError(
            422, "Invalid", f"{prefix}: spec.selector: Invalid value: field is immutable"
        )
    replicas = spec.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise ApiError(
            422,
            "Invalid",
            f"{prefix}: spec.replicas: Invalid value: {replicas!r}: must be greater than or "
            "equal to 0",
        )
    template = spec.get("template")
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        raise ApiError(422, "Invalid", f"{prefix}: spec.template.spec: Required value")
