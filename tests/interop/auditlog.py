"""An audit backend for the simulator: every write to its API server, logged in the
documented kube-apiserver audit format (docs/interop.md), with the user each real
component authenticates as.

The simulator's components call its API server directly; this wraps those calls the way
kube-apiserver's audit filter wraps its handlers (the outermost request only: a binding
that updates the pod inside is one ``pods/binding`` create). Levels follow a common
policy: pods are created at ``RequestResponse``, everything else at ``Request``; kubelet
status writes are strategic-merge patches of ``status``, as real kubelets send them.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from handoff.core.trace import format_time
from handoff.sim.components.apiserver import APIServer

PODGC = "system:serviceaccount:kube-system:pod-garbage-collector"
ACTORS = {
    "handoff.sim.components.scheduler": "system:kube-scheduler",
    "handoff.sim.components.podgc": PODGC,
    "handoff.sim.components.nodelifecycle": "system:serviceaccount:kube-system:node-controller",
    "handoff.sim.components.controllers.deployments": "system:kube-controller-manager",
    "handoff.sim.components.controllers.replicasets": "system:kube-controller-manager",
    "handoff.sim.components.controllers.jobs": "system:kube-controller-manager",
    "handoff.sim.components.controllers.owners": "system:kube-controller-manager",
}


class AuditRecorder:
    def __init__(self, api: APIServer, version: str = "audit.k8s.io/v1") -> None:
        self.api = api
        self.version = version
        self.lines: list[bytes] = []
        self.depth = 0

    def log(self, verb: str, resource: str, obj: dict[str, Any], **extra: Any) -> None:
        meta = obj.get("metadata") or {}
        subresource = extra.pop("subresource", "")
        user = extra.pop("user", None) or _actor(resource, obj)
        at = format_time(self.api.loop.now)
        ref = {"resource": resource, "name": meta.get("name"), "apiVersion": "v1"}
        if meta.get("namespace"):
            ref["namespace"] = meta["namespace"]
        if subresource:
            ref["subresource"] = subresource
        number = len(self.lines)
        event = {
            "kind": "Event",
            # Both versions in one log, as after an apiserver upgrade.
            "apiVersion": self.version if number % 3 else "audit.k8s.io/v1beta1",
            "level": extra.pop("level", "Request"),
            "auditID": f"audit-{number}",
            "verb": verb,
            "user": {"username": user, "groups": ["system:authenticated"]},
            "objectRef": ref,
            "responseStatus": {"metadata": {}, "code": 201 if verb == "create" else 200},
            "requestReceivedTimestamp": at,
            **extra,
        }
        self.lines.append(orjson.dumps({**event, "stage": "RequestReceived", "stageTimestamp": at}))
        self.lines.append(
            orjson.dumps({**event, "stage": "ResponseComplete", "stageTimestamp": at})
        )

    def text(self) -> bytes:
        return b"\n".join(self.lines) + b"\n"


def _actor(resource: str, obj: dict[str, Any]) -> str:
    frame = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("handoff.sim.components.kubelet."):
            if resource == "nodes":
                return f"system:node:{obj['metadata']['name']}"
            return f"system:node:{(obj.get('spec') or {}).get('nodeName', '')}"
        if module in ACTORS:
            return ACTORS[module]
        frame = frame.f_back
    return "kubernetes-admin"


@contextmanager
def audited(monkeypatch: Any) -> Iterator[list[AuditRecorder]]:
    """Every APIServer made inside gets an AuditRecorder (yielded as they appear)."""
    recorders: list[AuditRecorder] = []
    original_init = APIServer.__init__
    create, update, bind, delete = (
        APIServer.create,
        APIServer.update,
        APIServer.bind,
        APIServer.delete,
    )

    def init(self: APIServer, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._audit = AuditRecorder(self)
        recorders.append(self._audit)

    def outermost(method: Any, record: Any) -> Any:
        def wrapper(self: APIServer, *args: Any, **kwargs: Any) -> Any:
            audit: AuditRecorder = self._audit
            audit.depth += 1
            try:
                result = method(self, *args, **kwargs)
            finally:
                audit.depth -= 1
            if audit.depth == 0:
                record(audit, result, *args, **kwargs)
            return result

        return wrapper

    def on_create(audit: AuditRecorder, result: Any, resource: str, obj: Any, **_: Any) -> None:
        if resource == "pods":
            audit.log("create", resource, result, level="RequestResponse", responseObject=result)
        else:
            audit.log("create", resource, result, requestObject=_body(obj))

    def on_update(audit: AuditRecorder, result: Any, resource: str, new: Any) -> None:
        user = _actor(resource, new)
        if resource == "pods" and user.startswith("system:node:"):
            patch = {"status": copy.deepcopy(new.get("status") or {})}
            audit.log("patch", resource, new, subresource="status", user=user, requestObject=patch)
        elif resource == "nodes":
            audit.log(
                "update", resource, new, subresource="status", user=user, requestObject=_body(new)
            )
        else:
            audit.log("update", resource, new, user=user, requestObject=_body(new))

    def on_bind(audit: AuditRecorder, result: Any, namespace: str, name: str, node: str) -> None:
        binding = {
            "kind": "Binding",
            "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"kind": "Node", "name": node},
        }
        audit.log("create", "pods", result, subresource="binding", requestObject=binding)

    def on_delete(
        audit: AuditRecorder,
        result: Any,
        resource: str,
        namespace: str,
        name: str,
        grace: Any = None,
    ) -> None:
        options = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        audit.log("delete", resource, result, requestObject=options)

    monkeypatch.setattr(APIServer, "__init__", init)
    monkeypatch.setattr(APIServer, "create", outermost(create, on_create))
    monkeypatch.setattr(APIServer, "update", outermost(update, on_update))
    monkeypatch.setattr(APIServer, "bind", outermost(bind, on_bind))
    monkeypatch.setattr(APIServer, "delete", outermost(delete, on_delete))
    yield recorders


def _body(obj: Any) -> Any:
    body = copy.deepcopy(obj)
    if isinstance(body, dict):
        body.get("metadata", {}).pop("resourceVersion", None)
    return body
