"""The stored form of a pod view: what the live store keeps in ``handoff:{c}:pods``.

A pod view (``views.pod_view`` + ``deleted_blind``) is stored as MessagePack in a
compact form: a positional array (VIEW_FORMAT first) instead of objects with their keys,
each distinct instant once in a table and referred to by its place in it, stage names as
their place in ``verdicts.STAGES``, and the explanation left out when ``explain`` gives
the same text again from what the view keeps (it is rebuilt when read). The first item
of each list of objects (stages, events, changes) is checked to have the keys, in the
order, the form expects; a view of any other shape is stored as a plain MessagePack map.
Views stored as JSON by versions before this one (they start with ``{``) still decode.
``decode_view`` is the one reader of stored views; the store's drop script reads them in
Lua (``LUA_POSITIONS``).

Plain Python: the fold encodes before it writes, the read side decodes what it reads, and
the store itself only moves the bytes (it never needs ``explain``).
"""

from __future__ import annotations

from itertools import count
from operator import itemgetter
from typing import Any

import msgspec
import orjson

from handoff.core import verdicts as v
from handoff.core.explain import Context, explain
from handoff.core.facts import parse_admission_message

VIEW_FORMAT = 1
# Where the store's Lua (``store.drop_pods``) finds a compact view's index fields: their
# places in the stored array, counting from 1 as Lua does (VIEW_FORMAT is at 1).
LUA_POSITIONS = {"namespace": 2, "name": 3, "node": 5, "binding": 7, "verdict": 9}
_VERDICT_AT, _NAMESPACE_AT, _NODE_AT = (
    LUA_POSITIONS[name] - 1 for name in ("verdict", "namespace", "node")
)
_VIEW_KEYS = (
    "namespace",
    "name",
    "uid",
    "node",
    "node_exists",
    "binding",
    "owner",
    "verdict",
    "reason",
    "explanation",
    "since",
    "milestones",
    "durations",
    "stages",
    "rejection",
    "podgc",
    "events",
    "changes",
)
_VIEW_KEYS_BLIND = (*_VIEW_KEYS, "deleted_blind")
_DURATION_KEYS = tuple(name for name, _start, _end in v.DURATIONS)
_STAGE_KEYS = ("name", "start", "end", "open")
_STAGE_NAMES = tuple(stage.name for stage in v.STAGES)
_STAGE_CODE = {name: index for index, name in enumerate(_STAGE_NAMES)}
_EVENT_KEYS = ("reason", "type", "source", "host", "message", "first", "last", "count")
_CHANGE_KEYS = ("at", "what")
_OWNER_KEYS = ("kind", "name")
_OWNER_KEYS_WORKLOAD = ("kind", "name", "workload")
_get_name, _get_start, _get_end = itemgetter("name"), itemgetter("start"), itemgetter("end")
_get_open = itemgetter("open")
_get_first, _get_last = itemgetter("first"), itemgetter("last")
_get_at, _get_what = itemgetter("at"), itemgetter("what")
_event_head = itemgetter("reason", "type", "source", "host", "message")
_get_count = itemgetter("count")
_INSTANT_TYPES = {str, type(None)}
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder()


def encode_view(view: dict[str, Any]) -> bytes:
    """The stored form of a pod view; ``decode_view`` gives back an equal dict."""
    compact = _compact(view)
    return _encoder.encode(view if compact is None else compact)


def decode_view(raw: bytes | str) -> dict[str, Any]:
    """A stored pod view, in whichever form it was stored (compact, map, older JSON)."""
    if raw[:1] in (b"{", "{"):
        return orjson.loads(raw)
    data = _decoder.decode(raw)
    if type(data) is dict:
        return data
    return _expand(data)


def index_fields(raw: bytes | str) -> tuple[str, str, str]:
    """(verdict, namespace, node or "") of a stored view: what its index entries were
    written from (``store.write_pods``), without expanding the rest of it."""
    if raw[:1] in (b"{", "{"):
        view = orjson.loads(raw)
    else:
        data = _decoder.decode(raw)
        if type(data) is dict:
            view = data
        else:
            return data[_VERDICT_AT], data[_NAMESPACE_AT], data[_NODE_AT] or ""
    return view["verdict"], view["namespace"], view["node"] or ""


def _compact(view: dict[str, Any]) -> list[Any] | None:
    keys = tuple(view)
    if keys != _VIEW_KEYS_BLIND and keys != _VIEW_KEYS:
        return None
    milestones, durations, owner = view["milestones"], view["durations"], view["owner"]
    stages, events, changes = view["stages"], view["events"], view["changes"]
    if (
        type(milestones) is not dict
        or tuple(milestones) != v.MILESTONES
        or type(durations) is not dict
        or tuple(durations) != _DURATION_KEYS
        or type(stages) is not list
        or (stages and tuple(stages[0]) != _STAGE_KEYS)
        or type(events) is not list
        or (events and tuple(events[0]) != _EVENT_KEYS)
        or type(changes) is not list
        or (changes and tuple(changes[0]) != _CHANGE_KEYS)
        or (
            owner is not None
            and tuple(owner) != _OWNER_KEYS
            and tuple(owner) != _OWNER_KEYS_WORKLOAD
        )
    ):
        return None
    try:
        # Every instant of the view, in a fixed order (since, milestones, stage starts,
        # stage ends, changes, event firsts, event lasts): stored once each in ``table``,
        # and as their places in it in ``refs``.
        instants = [
            view["since"],
            *milestones.values(),
            *map(_get_start, stages),
            *map(_get_end, stages),
            *map(_get_at, changes),
            *map(_get_first, events),
            *map(_get_last, events),
        ]
        table = list(dict.fromkeys(instants))
        names = list(map(_get_name, stages))
        explanation = view["explanation"]
        if (
            not set(map(type, table)) <= _INSTANT_TYPES
            or not all(map(_STAGE_CODE.__contains__, names))
            or type(explanation) is not str
        ):
            return None
        refs = list(map(dict(zip(table, count())).__getitem__, instants))
        if explanation == explain(view["verdict"], view["reason"], _explain_context(view)):
            explanation = None  # rebuilt on read
        out = [
            VIEW_FORMAT,
            view["namespace"],
            view["name"],
            view["uid"],
            view["node"],
            view["node_exists"],
            view["binding"],
            _owner_row(owner),
            view["verdict"],
            view["reason"],
            explanation,
            table,
            refs,
            list(durations.values()),
            list(map(_STAGE_CODE.__getitem__, names)),
            list(map(_get_open, stages)),
            view["rejection"],
            view["podgc"],
            list(map(_event_head, events)),
            list(map(_get_count, events)),
            list(map(_get_what, changes)),
        ]
    except (KeyError, TypeError, ValueError, AttributeError):
        return None  # not the shape the compact form describes: stored as it is
    if len(keys) == len(_VIEW_KEYS_BLIND):
        out.append(view["deleted_blind"])
    return out


def _expand(data: list[Any]) -> dict[str, Any]:
    (
        fmt,
        namespace,
        name,
        uid,
        node,
        node_exists,
        binding,
        owner,
        verdict,
        reason,
        explanation,
        table,
        refs,
        spans,
        names,
        opens,
        rejection,
        podgc,
        heads,
        counts,
        whats,
        *blind,
    ) = data
    if fmt != VIEW_FORMAT:
        raise ValueError(f"stored pod view of an unknown format: {fmt!r}")
    instants = list(map(table.__getitem__, refs))
    marks = 1 + len(v.MILESTONES)
    starts = marks + len(names)
    ats = starts + len(names)
    firsts = ats + len(whats)
    lasts = firsts + len(heads)
    view = {
        "namespace": namespace,
        "name": name,
        "uid": uid,
        "node": node,
        "node_exists": node_exists,
        "binding": binding,
        "owner": _owner_dict(owner),
        "verdict": verdict,
        "reason": reason,
        "explanation": explanation,
        "since": instants[0],
        "milestones": dict(zip(v.MILESTONES, instants[1:marks], strict=True)),
        "durations": dict(zip(_DURATION_KEYS, spans, strict=True)),
        "stages": [
            {"name": _STAGE_NAMES[code], "start": start, "end": end, "open": is_open}
            for code, start, end, is_open in zip(
                names, instants[marks:starts], instants[starts:ats], opens, strict=True
            )
        ],
        "rejection": rejection,
        "podgc": podgc,
        "events": _events(heads, instants[firsts:lasts], instants[lasts:], counts),
        "changes": [
            {"at": at, "what": what} for at, what in zip(instants[ats:firsts], whats, strict=True)
        ],
    }
    if blind:
        view["deleted_blind"] = blind[0]
    if explanation is None:
        view["explanation"] = explain(verdict, reason, _explain_context(view))
    return view


def _owner_row(owner: dict[str, Any] | None) -> tuple[str, ...] | None:
    """(kind, name), and the workload's kind and name when the view has one."""
    if owner is None:
        return None
    workload = owner.get("workload")
    if workload is None:
        return (owner["kind"], owner["name"])
    return (owner["kind"], owner["name"], workload["kind"], workload["name"])


def _owner_dict(owner: list[Any] | None) -> dict[str, Any] | None:
    if owner is None:
        return None
    view: dict[str, Any] = {"kind": owner[0], "name": owner[1]}
    if len(owner) == 4:
        view["workload"] = {"kind": owner[2], "name": owner[3]}
    return view


def _events(
    heads: list[Any], firsts: list[Any], lasts: list[Any], counts: list[Any]
) -> list[dict[str, Any]]:
    return [
        {
            "reason": head[0],
            "type": head[1],
            "source": head[2],
            "host": head[3],
            "message": head[4],
            "first": first,
            "last": last,
            "count": count,
        }
        for head, first, last, count in zip(heads, firsts, lasts, counts, strict=True)
    ]


def _explain_context(view: dict[str, Any]) -> Context:
    """What ``explain`` needs, as far as the view itself tells (``views.pod_view`` knows
    more, such as the time since binding: a view whose explanation needs that keeps it)."""
    rejection, owner, podgc = view["rejection"], view["owner"], view["podgc"]
    if rejection is None and owner is None and podgc is None:
        return Context(node=view["node"] or "", binding=view["binding"])
    message = (rejection.get("message") or "") if rejection else ""
    return Context(
        node=view["node"] or "",
        binding=view["binding"],
        message=message,
        resources=parse_admission_message(message) if rejection else None,
        owner_kind=owner["kind"] if owner else "",
        podgc_from=(podgc["earliest"] or "") if podgc else "",
        podgc_to=(podgc["latest"] or "") if podgc else "",
    )
