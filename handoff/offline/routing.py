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

import re
from collections.abc import Iterable, Iterator
from typing import Any
from zlib import crc32

import orjson

SHARED = -1  # a line every worker folds

# A line's start in the shapes read from bytes: a Pod's name; a Node; an Event, core/v1
# (group 3 set) or events.k8s.io/v1. A string with an escape in it is not matched.
_HEAD = re.compile(
    rb'\{"observed":"[^"\\]*","type":"[A-Z]*","object":\{"kind":"'
    rb'(?:Pod","apiVersion":"v1","metadata":\{"name":"([^"\\]*)"'
    rb'|(N)ode","apiVersion":"v1",'
    rb'|Event","apiVersion":"(?:(v1)|events\.k8s\.io/v1)",)'
)
# An Event's object reference: a Pod's name (group 1), or a kind other than Pod.
_REFERENCE = rb'":\{"kind":"(?:Pod",(?:"namespace":"[^"\\]*",)?"name":"([^"\\]*)"|(?!Pod")[^"\\]*")'
_INVOLVED = re.compile(rb'"involvedObject' + _REFERENCE)
_REGARDING = re.compile(rb'"regarding' + _REFERENCE)
_UNKNOWN = object()  # the bytes did not tell: parse the line


def worker_of(raw: bytes, workers: int) -> int:
    """The worker (0 .. workers - 1) that folds this line, or ``SHARED``: ``Share``'s
    choice in its plain form (the tests hold one to the other)."""
    name = _name_from_bytes(raw)
    if name is _UNKNOWN:
        name = _name_from_json(raw)
    if name is None:
        return SHARED
    return crc32(name) % workers  # type: ignore[arg-type]


class Share:
    """The lines one worker of ``workers`` folds, from all of a trace's lines: iterating
    gives (line number, line, shared) for its pods' lines and the shared ones; ``lines``
    is then the number of lines read. ``worker_of``'s choice, its steps inlined: every
    worker reads every line, and two calls a line were a third of the routing's time."""

    def __init__(self, stream: Iterable[bytes], index: int, workers: int) -> None:
        self.stream = stream
        self.index = index
        self.workers = workers
        self.lines = 0

    def __iter__(self) -> Iterator[tuple[int, bytes, bool]]:
        head, involved, regarding = _HEAD.match, _INVOLVED.search, _REGARDING.search
        index, workers = self.index, self.workers
        number = 0
        for number, raw in enumerate(self.stream, 1):
            match = head(raw)
            if match is None:
                name = _name_from_json(raw)
            else:
                name, node, core = match.groups()
                if name is None and node is None:
                    reference = (involved if core is not None else regarding)(raw, match.end())
                    name = _name_from_json(raw) if reference is None else reference.group(1)
            if name is None:
                yield number, raw, True
            elif crc32(name) % workers == index:
                yield number, raw, False
        self.lines = number


def _name_from_bytes(raw: bytes, head: Any = _HEAD.match) -> bytes | object | None:
    """The name of the pod a line is about, None for a line about no pod, or
    ``_UNKNOWN`` when the line is not in one of the shapes read here. Regular
    expressions: a few C calls a line, where slicing and searching took a dozen steps
    of Python (1.5 µs a line, read by every worker)."""
    match = head(raw)
    if match is None:
        return _UNKNOWN
    name, node, core = match.groups()
    if name is not None:
        return name
    if node is not None:
        return None
    reference = (_INVOLVED if core is not None else _REGARDING).search(raw, match.end())
    return _UNKNOWN if reference is None else reference.group(1)


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
