"""What each pod and node of a recorded run went through, in terms two runs of the same
scenario can be compared in: Handoff's verdict, binding and reason; the events about it
(type, reason, source, reporting component, the API group that wrote it); the sequence of
watch updates it had; and when its deletion was asked for and done, in seconds since the
run's start. The first message of each event reason is compared, with the object's own
name replaced by ``<it>``.

Pods are matched by namespace and name; a ReplicaSet's pods (generated names, whose hash
differs between the runs) by their Deployment's name and creation order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from devtools.fidelity.runs import Recorded
from handoff.core.trace import open_binary, parse_time
from handoff.offline.triage import fold_trace

NEW_RECORDER = "events.k8s.io/v1"  # written through it: core/v1 shows no source
OLD_RECORDER = "v1"


@dataclass
class Situation:
    """One pod (or node) as one run saw it. ``None`` times: it never happened."""

    key: str
    verdict: str | None = None
    binding: str | None = None
    reason: str | None = None
    events: set[str] = field(default_factory=set)
    messages: set[str] = field(default_factory=set)
    updates: list[str] = field(default_factory=list)
    deletion_asked: float | None = None
    deleted: float | None = None

    def facts(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "binding": self.binding,
            "reason": self.reason,
            "events": sorted(self.events),
            "messages": sorted(self.messages),
            "updates": self.updates,
            "deletion_asked": self.deletion_asked,
            "deleted": self.deleted,
        }


def situations(run: Recorded, stuck_after: float) -> dict[str, Situation]:
    """Every pod created in the run and every node it had, by key."""
    found: dict[str, Situation] = {}
    keys = Keys()
    previous: dict[str, dict[str, Any]] = {}
    # Events and their objects come through separate watches: on a loaded machine an
    # event (the scheduler's Scheduled) can be observed before its pod's first update.
    # It waits here until its object is known.
    early: list[dict[str, Any]] = []
    for observed, type_, obj in _lines(run):
        kind = obj.get("kind")
        if kind == "Event":
            if not _note_event(found, keys, obj):
                early.append(obj)
            continue
        key = keys.of(obj, run.start)
        if key is None:
            continue
        early = [event for event in early if not _note_event(found, keys, event)]
        situation = found.setdefault(key, Situation(key))
        uid = obj["metadata"].get("uid", "")
        token = update_token(type_, previous.get(uid), obj)
        situation.updates.append(token)
        previous[uid] = obj
        _note_deletion(situation, type_, obj, observed - run.start)
    _judge(found, keys, run, stuck_after)
    return found


def _lines(run: Recorded) -> Iterator[tuple[float, str, dict[str, Any]]]:
    with open_binary(run.trace) as handle:
        for raw in handle:
            record = orjson.loads(raw)
            if "object" in record and record.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                yield parse_time(record["observed"]), record["type"], record["object"]


class Keys:
    """Run-independent names: ``ns/name`` for a pod, ``ns/<deployment>#N`` for the Nth pod
    of a Deployment's ReplicaSets, ``node/NAME`` for a node; by uid once known."""

    def __init__(self) -> None:
        self.by_uid: dict[str, str] = {}
        self.by_name: dict[tuple[str, str], str] = {}
        self.counts: dict[str, int] = {}

    def of(self, obj: dict[str, Any], start: float) -> str | None:
        meta = obj["metadata"]
        uid = meta.get("uid", "")
        if uid in self.by_uid:
            return self.by_uid[uid]
        stamp = meta.get("creationTimestamp")
        if stamp and parse_time(stamp) < start - 1:
            return None  # made before the run: not the scenario's
        key = f"node/{meta['name']}" if obj.get("kind") == "Node" else self._pod_key(meta)
        self.by_uid[uid] = key
        self.by_name[(meta.get("namespace", ""), meta["name"])] = key
        return key

    def _pod_key(self, meta: dict[str, Any]) -> str:
        namespace = meta.get("namespace", "")
        owners = meta.get("ownerReferences") or []
        if owners and owners[0].get("kind") == "ReplicaSet":
            base = f"{namespace}/{owners[0]['name'].rpartition('-')[0]}"
            self.counts[base] = self.counts.get(base, 0) + 1
            return f"{base}#{self.counts[base]}"
        return f"{namespace}/{meta['name']}"

    def about(self, involved: dict[str, Any]) -> str | None:
        """The key of an event's object: by uid, else (taint manager events carry none)
        the latest of that namespace and name."""
        if involved.get("kind") == "Node":
            return self.by_name.get(("", involved.get("name", "")))
        uid = involved.get("uid")
        if uid and uid in self.by_uid:
            return self.by_uid[uid]
        return self.by_name.get((involved.get("namespace", ""), involved.get("name", "")))


def event_token(event: dict[str, Any]) -> str:
    """``type reason source=… reporting=… group``, plus ``no-uid`` when the event does not
    name its object's uid. The group is the recorder's: the new one (events.k8s.io/v1)
    leaves core/v1's ``source`` empty."""
    source = (event.get("source") or {}).get("component") or "-"
    reporting = event.get("reportingComponent") or event.get("reportingController") or "-"
    group = OLD_RECORDER if source != "-" else NEW_RECORDER
    token = f"{event.get('type')} {event.get('reason')} source={source} reporting={reporting}"
    token += f" {group}"
    if not (event.get("involvedObject") or {}).get("uid"):
        token += " no-uid"
    return token


def _note_event(found: dict[str, Situation], keys: Keys, event: dict[str, Any]) -> bool:
    """Count the event for its object's situation; False when the object is not known
    (yet)."""
    involved = event.get("involvedObject") or {}
    key = keys.about(involved)
    if key is None:
        return False
    situation = found.setdefault(key, Situation(key))
    situation.events.add(event_token(event))
    reason = str(event.get("reason"))
    if any(m.startswith(f"{reason}: ") for m in situation.messages):
        return True  # a retry's text depends on when it came (a 30 s flush tick): the first only
    # Its own name (generated for a ReplicaSet's pods, so it differs between runs) as <it>.
    message = str(event.get("message") or "").replace(involved.get("name") or "\0", "<it>")
    situation.messages.add(f"{reason}: {message}")
    return True


def update_token(type_: str, old: dict[str, Any] | None, new: dict[str, Any]) -> str:
    """One watch update as what it changed: ``ADDED``, ``DELETED``, or ``MODIFIED`` with
    the facets that changed (nodeName, phase, deletion and its grace, conditions, taints,
    containers); ``MODIFIED other`` when none of them did."""
    if type_ != "MODIFIED" or old is None:
        return type_
    before, after = _facets(old), _facets(new)
    changed = [facet for facet in after if facet not in before]
    changed += [
        f"-{facet}" for facet in before if facet.startswith("taint:") and facet not in after
    ]
    return "MODIFIED " + (",".join(changed) if changed else "other")


def _facets(obj: dict[str, Any]) -> list[str]:
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    facets = []
    if spec.get("nodeName"):
        facets.append("nodeName")
    if status.get("phase"):
        facets.append(f"phase={status['phase']}")
    if meta.get("deletionTimestamp"):
        facets.append(f"deletion(grace={meta.get('deletionGracePeriodSeconds')})")
    for condition in status.get("conditions") or ():
        facets.append(f"{condition['type']}={condition['status']}")
    for taint in spec.get("taints") or ():
        facets.append(f"taint:{taint['key']}:{taint['effect']}")
    for container in status.get("containerStatuses") or ():
        state = next(iter(container.get("state") or {"none": 0}))
        facets.append(f"container:{state}")
    return facets


def _note_deletion(situation: Situation, type_: str, obj: dict[str, Any], at: float) -> None:
    if situation.deletion_asked is None and obj["metadata"].get("deletionTimestamp"):
        situation.deletion_asked = round(at, 1)
    if type_ == "DELETED" and situation.deleted is None:
        situation.deleted = round(at, 1)


def _judge(found: dict[str, Situation], keys: Keys, run: Recorded, stuck_after: float) -> None:
    report = fold_trace(run.trace, at=run.end, stuck_after=stuck_after)
    for view in report["pods"]:
        key = keys.by_uid.get(view["uid"])
        if key in found:
            situation = found[key]
            situation.verdict = view["verdict"]
            situation.binding = view["binding"]
            situation.reason = view["reason"]
