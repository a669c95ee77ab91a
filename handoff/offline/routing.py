"""Which worker of a parallel triage folds a trace line (``offline.fanout``), read from
the line's bytes without decoding it.

Everything the fold keeps about one pod comes from lines about a pod of the same name:
its Pod updates, the Events regarding it (by uid, by name, or by a static pod's config
hash, which the kubelet reports under the mirror pod's name), the placeholders and
namesakes of Events without a uid (``Timeline._pod_for_event``). So a line about a pod
goes to one worker, chosen by the pod's name; every other line (Nodes, Events about
Nodes and workloads, the header, lines that are not JSON) goes to all of them, since
judging reads the nodes, and the fold keeps nothing of them in any pod.

The common shapes (the recorder's and the simulator's: ``{"observed":…,"type":…,
"object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":…``, an Event's
``involvedObject`` or ``regarding`` with its kind, namespace and name first, as the API
server writes them) are read from the bytes; any other line is parsed to find the same
name, so a line's worker never depends on how it was written.
"""

from __future__ import annotations

from typing import Any
from zlib import crc32

import orjson

SHARED = -1  # a line every worker folds

_OBJECT = b'"object":{"kind":"'
_POD = b'Pod","apiVersion":"v1","metadata":{"name":"'
_NODE = b'Node","apiVersion":"v1",'
_CORE_EVENT = b'Event","apiVersion":"v1",'
_NEW_EVENT = b'Event","apiVersion":"events.k8s.io/v1",'
_INVOLVED = b'"involvedObject":{"kind":"'
_REGARDING = b'"regarding":{"kind":"'
_NAMESPACE = b'"namespace":"'
_NAME = b'"name":"'
_UNKNOWN = object()  # the bytes did not tell: parse the line
_SCAN = 256  # the top-level "object" key comes this early in the shapes read from bytes


def worker_of(raw: bytes, workers: int) -> int:
    """The worker (0 .. workers - 1) that folds this line, or ``SHARED``."""
    name = _name_from_bytes(raw)
    if name is _UNKNOWN:
        name = _name_from_json(raw)
    if name is None:
        return SHARED
    return crc32(name) % workers  # type: ignore[arg-type]


def _name_from_bytes(raw: bytes) -> bytes | object | None:
    """The name of the pod a line is about, None for a line about no pod, or
    ``_UNKNOWN`` when the line is not in one of the shapes read here."""
    start = raw.find(_OBJECT, 0, _SCAN)
    if start < 0 or not raw.startswith(b'{"observed":"'):
        return _UNKNOWN
    at = start + len(_OBJECT)
    if raw.startswith(_POD, at):
        return _string(raw, at + len(_POD))
    if raw.startswith(_NODE, at):
        return None
    if raw.startswith(_CORE_EVENT, at):
        ref = raw.find(_INVOLVED, at)
        return _UNKNOWN if ref < 0 else _regarded(raw, ref + len(_INVOLVED))
    if raw.startswith(_NEW_EVENT, at):
        ref = raw.find(_REGARDING, at)
        return _UNKNOWN if ref < 0 else _regarded(raw, ref + len(_REGARDING))
    return _UNKNOWN


def _regarded(raw: bytes, at: int) -> bytes | object | None:
    """The pod named by an object reference whose kind starts at ``at``: ``Pod",`` then
    an optional namespace, then the name."""
    kind = _string(raw, at)
    if kind is _UNKNOWN or kind != b"Pod":
        return kind if kind is _UNKNOWN else None
    at += len(b'Pod",')
    if raw.startswith(_NAMESPACE, at):
        namespace = _string(raw, at + len(_NAMESPACE))
        if namespace is _UNKNOWN:
            return _UNKNOWN
        at += len(_NAMESPACE) + len(namespace) + 2  # type: ignore[arg-type]
        if raw[at - 1 : at] != b",":
            return _UNKNOWN
    if not raw.startswith(_NAME, at):
        return _UNKNOWN
    return _string(raw, at + len(_NAME))


def _string(raw: bytes, at: int) -> bytes | object:
    """The JSON string whose text starts at ``at``, when it has no escapes."""
    end = raw.find(b'"', at)
    if end < 0:
        return _UNKNOWN
    text = raw[at:end]
    return _UNKNOWN if b"\\" in text else text


def _name_from_json(raw: bytes) -> bytes | None:
    """``_name_from_bytes`` for any other line: parsed, as the fold reads it (a Pod's
    ``metadata.name``; an Event's ``regarding`` for events.k8s.io, else its
    ``involvedObject``, when that is a Pod). A pod line without a name is b""."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    obj = record.get("object") if isinstance(record, dict) else None
    if not isinstance(obj, dict):
        return None
    kind = obj.get("kind")
    if kind == "Pod":
        return _text(obj.get("metadata"), "name")
    if kind != "Event":
        return None
    api = obj.get("apiVersion")
    new = isinstance(api, str) and api.startswith("events.k8s.io")
    ref = obj.get("regarding" if new else "involvedObject")
    if not isinstance(ref, dict) or ref.get("kind") != "Pod":
        return None
    return _text(ref, "name")


def _text(holder: Any, key: str) -> bytes:
    value = holder.get(key) if isinstance(holder, dict) else None
    return value.encode() if isinstance(value, str) else b""
