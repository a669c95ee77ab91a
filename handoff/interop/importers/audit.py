"""kube-apiserver audit logs (``audit.k8s.io/v1`` and ``v1beta1`` Events, one per line, or
an ``EventList`` as an audit webhook posts them) rebuilt into the watch events a watcher
would have received.

Only the ``ResponseComplete`` stage of a successful (2xx) write to ``pods`` (and its
``binding``, ``status`` and ``eviction`` subresources), ``nodes`` (and ``nodes/status``)
or ``events`` is read; everything else — reads, other resources (Secrets among them:
their bodies never reach a parser that keeps anything), failed requests, earlier stages —
is counted in ``skipped`` and dropped. Each write is observed at its ``stageTimestamp``
(microseconds, the API server's own clock, when the response was complete: a watcher
receives the change a few milliseconds later).

The importer keeps every live object as last rebuilt and applies each write to it:

- ``RequestResponse`` level: the response body *is* the object after the write.
- ``Request`` level: a create's or update's request body is the object; a patch is applied
  (strategic merge for ``conditions`` by ``type``, JSON merge otherwise, JSON Patch lists);
  a binding's ``target`` sets ``spec.nodeName`` and ``PodScheduled=True`` at the bind's
  second.
- ``Metadata`` level: only who did what to which object and when. A create makes a
  stub (name, namespace, creation at the request's second); a binding without a target
  marks ``PodScheduled=True``, and the node is learnt from the first status write by
  ``system:node:NAME`` (a kubelet only writes pods bound to it).

A delete is ``DELETED`` when it removes the object at once (grace 0: PodGC, the kubelet's
final delete, an unbound or finished pod, or a response without ``deletionTimestamp``) and a
``MODIFIED`` with ``deletionTimestamp`` otherwise. A delete by the pod-garbage-collector of
a bound, unfinished pod that carries no ``DisruptionTarget`` (controller-managers before
1.26) gets ``DeletionByPodGC`` / ``PodGC: node no longer exists``, which is what that
controller deletes such pods for. Rebuilt objects carry the annotation
``handoff/rebuilt-from: audit-<level>`` and resourceVersions that only grow per object.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from handoff.core.resources import KIND_OF, WATCHED
from handoff.core.trace import LineError, WatchEvent, format_time, parse_time
from handoff.interop.importers.objects import EventMaker, normalise

PODGC_USER = "system:serviceaccount:kube-system:pod-garbage-collector"
SCHEDULER_USER = "system:kube-scheduler"
NODE_USER_PREFIX = "system:node:"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
RESOURCES = {resource: KIND_OF[resource] for resource in WATCHED}
SUBRESOURCES = {
    "pods": frozenset({"", "status", "binding", "eviction"}),
    "nodes": frozenset({"", "status"}),
    "events": frozenset({""}),
}
REBUILT = "handoff/rebuilt-from"


def is_audit_event(record: dict[str, Any]) -> bool:
    version = record.get("apiVersion")
    return isinstance(version, str) and version.startswith("audit.k8s.io/")


class AuditLog:
    def __init__(self, maker: EventMaker) -> None:
        self.maker = maker
        self.skipped = maker.skipped
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.versions: dict[tuple[str, str, str], int] = {}
        self.incarnations: dict[tuple[str, str, str], int] = {}

    def take(self, line: int, record: dict[str, Any]) -> Iterator[WatchEvent]:
        if record.get("kind") == "EventList":
            for item in record.get("items") or []:
                if isinstance(item, dict):
                    yield from self.take(line, item)
            return
        event = self._take_one(line, record)
        if event is not None:
            yield event

    def _take_one(self, line: int, record: dict[str, Any]) -> WatchEvent | None:
        stage = record.get("stage")
        if stage != "ResponseComplete":
            self.skipped[f"audit stage {stage}"] += 1
            return None
        ref = record.get("objectRef") if isinstance(record.get("objectRef"), dict) else {}
        resource = ref.get("resource")
        subresource = ref.get("subresource") or ""
        verb = record.get("verb")
        if resource not in RESOURCES or subresource not in SUBRESOURCES[resource]:
            self.skipped["audit other resource"] += 1
            return None
        if verb not in WRITE_VERBS:
            self.skipped[f"audit {verb}"] += 1
            return None
        status = (
            record.get("responseStatus") if isinstance(record.get("responseStatus"), dict) else {}
        )
        code = status.get("code")
        if isinstance(code, int) and not 200 <= code < 300:
            self.skipped["audit failed request"] += 1
            return None
        at = _when(record)
        if at is None:
            self.maker.errors.append(
                LineError(line, "audit event without a readable stageTimestamp")
            )
            return None
        return self._apply(line, record, ref, RESOURCES[resource], subresource, verb, at)

    def _apply(
        self,
        line: int,
        record: dict[str, Any],
        ref: dict[str, Any],
        kind: str,
        subresource: str,
        verb: str,
        at: float,
    ) -> WatchEvent | None:
        response = _body(record.get("responseObject"), kind)
        request = record.get("requestObject")
        name = ref.get("name") or _meta(response).get("name") or _meta(request).get("name")
        namespace = ref.get("namespace") or ""
        if not name:
            self.maker.errors.append(LineError(line, f"audit {verb} of a {kind} without a name"))
            return None
        key = (kind, namespace, name)
        user = _username(record)
        level = record.get("level") or "Metadata"
        current = self.objects.get(key)
        if verb == "create" and subresource == "":
            obj = response or _body(request, kind) or {}
            obj = copy.deepcopy(obj)
            self.incarnations[key] = self.incarnations.get(key, 0) + 1
            _fill_identity(obj, kind, namespace, name, at, ref, self.incarnations[key])
            type_ = "ADDED"
        elif current is None and kind == "Node" and verb == "delete":
            # A node that predates the log going away still matters: PodGC and the
            # verdicts of pods bound to it depend on whether it exists.
            obj, type_ = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": name}}, "DELETED"
        elif current is None:
            if response is None or verb == "delete":
                self.skipped[f"audit {verb} of an object created before the log"] += 1
                return None
            obj, type_ = copy.deepcopy(response), "ADDED"
        elif verb == "delete" and subresource == "":
            obj, type_ = self._delete(current, response, request, user, at)
        elif (
            response is None
            and request is None
            and subresource not in ("binding", "eviction")
            and not _learns_node(kind, user, current)
        ):
            self.skipped["audit write without a body"] += 1
            return None
        else:
            obj = copy.deepcopy(response) if response is not None else copy.deepcopy(current)
            if response is None:
                _apply_request(obj, kind, subresource, verb, request, at)
            type_ = "MODIFIED"
        if kind == "Pod" and user.startswith(NODE_USER_PREFIX):
            spec = obj.setdefault("spec", {})
            if isinstance(spec, dict) and not spec.get("nodeName"):
                spec["nodeName"] = user[len(NODE_USER_PREFIX) :]
        if response is None:
            obj.setdefault("metadata", {}).setdefault("annotations", {})[REBUILT] = (
                f"audit-{str(level).lower()}"
            )
        self._version(key, obj)
        if type_ == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        if not self.maker.wanted(obj, line):
            return None
        return self.maker.make(at, type_, normalise(copy.deepcopy(obj)), line)

    def _delete(
        self,
        current: dict[str, Any],
        response: dict[str, Any] | None,
        request: Any,
        user: str,
        at: float,
    ) -> tuple[dict[str, Any], str]:
        if response is not None:
            meta = _meta(response)
            graceful = meta.get("deletionTimestamp") and meta.get("deletionGracePeriodSeconds")
            return copy.deepcopy(response), "MODIFIED" if graceful else "DELETED"
        obj = copy.deepcopy(current)
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        grace = request.get("gracePeriodSeconds") if isinstance(request, dict) else None
        finished = status.get("phase") in ("Succeeded", "Failed")
        if (
            obj.get("kind") == "Pod"
            and user == PODGC_USER
            and spec.get("nodeName")
            and not finished
        ):
            _podgc_condition(obj, at)
        immediate = (
            grace == 0
            or user == PODGC_USER
            or user.startswith(NODE_USER_PREFIX)
            or obj.get("kind") != "Pod"
            or not spec.get("nodeName")
            or finished
        )
        if immediate:
            return obj, "DELETED"
        if not isinstance(grace, int):
            grace = spec.get("terminationGracePeriodSeconds", 30)
        meta = obj.setdefault("metadata", {})
        meta["deletionTimestamp"] = _second(at + grace)
        meta["deletionGracePeriodSeconds"] = grace
        return obj, "MODIFIED"

    def _version(self, key: tuple[str, str, str], obj: dict[str, Any]) -> None:
        """resourceVersions only grow per object, so the fold never takes a write as stale."""
        meta = obj.setdefault("metadata", {})
        try:
            real = int(meta.get("resourceVersion") or 0)
        except (TypeError, ValueError):
            real = 0
        version = max(real, self.versions.get(key, 0) + 1)
        self.versions[key] = version
        meta["resourceVersion"] = str(version)


def _learns_node(kind: str, user: str, current: dict[str, Any]) -> bool:
    """A Metadata-level status write by a kubelet still says which node holds the pod."""
    spec = current.get("spec") if isinstance(current.get("spec"), dict) else {}
    return kind == "Pod" and user.startswith(NODE_USER_PREFIX) and not spec.get("nodeName")


def _when(record: dict[str, Any]) -> float | None:
    for field in ("stageTimestamp", "timestamp", "requestReceivedTimestamp"):
        value = record.get(field)
        if isinstance(value, str):
            try:
                return parse_time(value)
            except ValueError:
                continue
    return None


def _username(record: dict[str, Any]) -> str:
    user = record.get("user") if isinstance(record.get("user"), dict) else {}
    name = user.get("username")
    return name if isinstance(name, str) else ""


def _meta(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        return obj["metadata"]
    return {}


def _body(obj: Any, kind: str) -> dict[str, Any] | None:
    """A request or response body that is the object itself (not a Status, a Binding,
    DeleteOptions or a patch)."""
    if isinstance(obj, dict) and obj.get("kind") == kind:
        return obj
    return None


def _second(at: float) -> str:
    """An object timestamp as the API server writes it: whole seconds."""
    return format_time(float(int(at)))[:19] + "Z"


def _fill_identity(
    obj: dict[str, Any],
    kind: str,
    namespace: str,
    name: str,
    at: float,
    ref: dict[str, Any],
    incarnation: int,
) -> None:
    obj["kind"] = kind
    obj.setdefault("apiVersion", ref.get("apiVersion") or "v1")
    meta = obj.setdefault("metadata", {})
    meta["name"] = name
    if namespace:
        meta["namespace"] = namespace
    if not meta.get("uid"):
        meta["uid"] = ref.get("uid") or f"audit:{namespace}/{name}#{incarnation}"
    if not meta.get("creationTimestamp"):
        meta["creationTimestamp"] = _second(at)


def _apply_request(
    obj: dict[str, Any], kind: str, subresource: str, verb: str, request: Any, at: float
) -> None:
    """A write whose response was not logged, applied to the object as last rebuilt."""
    if subresource == "binding":
        target = request.get("target") if isinstance(request, dict) else None
        node = target.get("name") if isinstance(target, dict) else None
        if node:
            obj.setdefault("spec", {})["nodeName"] = node
        _set_condition(obj, {"type": "PodScheduled", "status": "True"}, at)
        return
    if subresource == "eviction":
        _set_condition(
            obj,
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            },
            at,
        )
        meta = obj.setdefault("metadata", {})
        grace = (obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        meta.setdefault("deletionTimestamp", _second(at + grace))
        meta.setdefault("deletionGracePeriodSeconds", grace)
        return
    if request is None:
        return  # Metadata level: who wrote, not what
    if verb == "update" and _body(request, kind) is not None:
        keep = {
            "uid": _meta(obj).get("uid"),
            "creationTimestamp": _meta(obj).get("creationTimestamp"),
        }
        obj.clear()
        obj.update(copy.deepcopy(request))
        meta = obj.setdefault("metadata", {})
        for field, value in keep.items():
            if value and not meta.get(field):
                meta[field] = value
        return
    if isinstance(request, list):
        _json_patch(obj, request)
    elif isinstance(request, dict):
        _merge(obj, request)


def _set_condition(obj: dict[str, Any], condition: dict[str, Any], at: float) -> None:
    status = obj.setdefault("status", {})
    conditions = status.setdefault("conditions", [])
    condition = dict(condition, lastTransitionTime=_second(at))
    for index, existing in enumerate(conditions):
        if isinstance(existing, dict) and existing.get("type") == condition["type"]:
            if existing.get("status") == condition["status"]:
                condition["lastTransitionTime"] = existing.get("lastTransitionTime")
            conditions[index] = condition
            return
    conditions.append(condition)


def _podgc_condition(obj: dict[str, Any], at: float) -> None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    if any(isinstance(c, dict) and c.get("type") == "DisruptionTarget" for c in conditions):
        return
    status = obj.setdefault("status", {})
    status["phase"] = "Failed"
    _set_condition(
        obj,
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "DeletionByPodGC",
            "message": "PodGC: node no longer exists",
        },
        at,
    )


MERGE_KEYS = {"conditions": "type", "containerStatuses": "name", "initContainerStatuses": "name"}


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON merge patch, with the strategic-merge rules the kubelet's status patches
    rely on: lists of conditions merge by ``type``; ``$`` directives are ignored."""
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(target.get(key), list):
            target[key] = _merge_list(target[key], value, MERGE_KEYS[key])
        else:
            target[key] = copy.deepcopy(value)


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    merged = [copy.deepcopy(item) for item in current]
    index = {item.get(key): item for item in merged if isinstance(item, dict)}
    for item in patch:
        if not isinstance(item, dict):
            continue
        if item.get("$patch") == "delete":
            merged = [
                m for m in merged if not (isinstance(m, dict) and m.get(key) == item.get(key))
            ]
            continue
        existing = index.get(item.get(key))
        if existing is not None:
            _merge(existing, item)
        else:
            clean = {k: v for k, v in item.items() if not k.startswith("$")}
            merged.append(clean)
            index[item.get(key)] = clean
    return merged


def _json_patch(target: dict[str, Any], operations: list[Any]) -> None:
    """RFC 6902 add, replace and remove (what controllers send); others are ignored."""
    for op in operations:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            continue
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            continue
        parent: Any = target
        for part in parts[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else _at(parent, part)
            if parent is None:
                break
        last = parts[-1]
        if isinstance(parent, dict):
            if op.get("op") in ("add", "replace"):
                parent[last] = copy.deepcopy(op.get("value"))
            elif op.get("op") == "remove":
                parent.pop(last, None)
        elif isinstance(parent, list):
            if op.get("op") == "add" and last == "-":
                parent.append(copy.deepcopy(op.get("value")))
            elif last.isdigit() and int(last) < len(parent) + (op.get("op") == "add"):
                if op.get("op") == "add":
                    parent.insert(int(last), copy.deepcopy(op.get("value")))
                elif op.get("op") == "replace" and int(last) < len(parent):
                    parent[int(last)] = copy.deepcopy(op.get("value"))
                elif op.get("op") == "remove" and int(last) < len(parent):
                    del parent[int(last)]


def _at(items: Any, part: str) -> Any:
    if isinstance(items, list) and part.isdigit() and int(part) < len(items):
        return items[int(part)]
    return None
