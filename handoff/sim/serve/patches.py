"""PATCH bodies as the API server applies them: JSON merge patch (RFC 7386), strategic
merge patch (the subset kubectl sends for built-in kinds) and JSON patch (RFC 6902).

Strategic merge follows ``k8s.io/apimachinery/pkg/util/strategicpatch``: maps merge,
``null`` deletes a key, lists with a patch merge key (``containers`` by ``name``,
``conditions`` by ``type``, …) merge item by item, other lists are replaced, and the
directives ``$patch: replace|delete`` are honoured. ``$setElementOrder/<list>`` and
``$retainKeys``, which kubectl apply adds, only order or prune and are dropped.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"

# Lists merged by key (patchMergeKey in the types of k8s.io/api); the rest are replaced.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
    "schedulingGates": "name",
    "taints": "key",
}


class PatchError(ValueError):
    """A patch that cannot be applied; the message is the API server's kind of reason."""


class UnsupportedPatch(PatchError):
    """A Content-Type that is not a patch format the server takes (415)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            out[name] = [v for v in out.get(name) or () if v not in value]
            continue
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS:
            out[key] = _merge_list(out.get(key) or [], value, MERGE_KEYS[key])
        else:
            out[key] = strategic_merge_patch(out.get(key), value)
    return out


def _merge_list(current: list[Any], patch: list[Any], key: str) -> list[Any]:
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    out = list(current)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"map: {item!r} does not contain declared merge key: {key}")
        index = next((i for i, o in enumerate(out) if o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(strategic_merge_patch({}, item))
        else:
            out[index] = strategic_merge_patch(out[index], item)
    return out


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise PatchError(f"invalid JSON patch operation: {op!r}")
        kind, path = op["op"], _pointer(op["path"])
        if kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {op['path']} failed")
        elif kind == "remove":
            _remove(doc, path)
        elif kind in ("add", "replace"):
            if kind == "replace":
                _get(doc, path)
            doc = _add(doc, path, copy.deepcopy(op.get("value")), replace=kind == "replace")
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = copy.deepcopy(_get(doc, source))
            if kind == "move":
                _remove(doc, source)
            doc = _add(doc, path, value, replace=False)
        else:
            raise PatchError(f"unexpected JSON patch operation {kind!r}")
    return doc


def _pointer(text: str) -> list[str]:
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchError(f"invalid JSON pointer {text!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]


def _step(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        if part not in node:
            raise PatchError(f"doc is missing path: /{part}")
        return node[part]
    if isinstance(node, list):
        try:
            return node[int(part)]
        except (ValueError, IndexError) as exc:
            raise PatchError(f"invalid index {part!r}") from exc
    raise PatchError(f"cannot step into {type(node).__name__} with {part!r}")


def _get(doc: Any, path: list[str]) -> Any:
    node = doc
    for part in path:
        node = _step(node, part)
    return node


def _add(doc: Any, path: list[str], value: Any, *, replace: bool) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                index = int(last)
            except ValueError as exc:
                raise PatchError(f"invalid index {last!r}") from exc
            if not 0 <= index <= len(parent) - (1 if replace else 0):
                raise PatchError(f"index {index} out of range")
            if replace:
                parent[index] = value
            else:
                parent.insert(index, value)
    else:
        raise PatchError("cannot add to a scalar")
    return doc


def _remove(doc: Any, path: list[str]) -> None:
    if not path:
        raise PatchError("cannot remove the whole document")
    parent = _get(doc, path[:-1])
    _step(parent, path[-1])
    if isinstance(parent, dict):
        del parent[path[-1]]
    else:
        del parent[int(path[-1])]


def apply_patch(target: Any, content_type: str, body: Any) -> Any:
    """The patched object for a PATCH with this Content-Type (415 for anything else)."""
    kind = content_type.split(";", 1)[0].strip()
    if kind == MERGE:
        return merge_patch(target, body)
    if kind == STRATEGIC:
        return strategic_merge_patch(target, body)
    if kind == JSON_PATCH:
        return json_patch(target, body)
    raise UnsupportedPatch(
        "the body of the request was in an unknown format - accepted media types include: "
        f"{JSON_PATCH}, {MERGE}, {STRATEGIC}"
    )
