"""The fold: watch events in, per-pod handoff timelines out.

``Timeline.apply`` takes one watch event (Pod, Node or Event of either API
group) and updates the state of one cluster. It keeps only what a timeline
needs, never whole objects. It is idempotent (a relist or a redelivered event
changes nothing: stale resourceVersions are ignored, milestones keep their
earliest time) and indifferent to how the Pod and Event watches interleave
(facts from events and from pod status are combined when a pod is judged, not
when they arrive).

``Timeline.judge`` turns one pod's state into a verdict at a given time.
Milestone times follow one rule (``PodState.mark``): the watch receive time of
the event that revealed the fact, unless the object's own (1-second) timestamp
shows the watcher saw it more than a second late; of several pieces of
evidence the earliest wins, but a coarse second never undercuts a precise time
it cannot contradict, and a precise time inside a coarse second refines it.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from sys import intern
from typing import Any
from zlib import crc32

import msgspec

from handoff.core import verdicts as v
from handoff.core.facts import (
    KUBELET,
    EventFacts,
    StatusFacts,
    read_event,
    read_status,
    rv_number,
    seen_at,
    timestamp,
)
from handoff.core.gcpause import paused_gc
from handoff.core.report import build_report
from handoff.core.schema import (
    Annotations,
    Condition,
    KubeObject,
    ObjectMeta,
    Status,
    Taint,
    ValidationError,
    to_object,
)
from handoff.core.trace import TraceReader, WatchEvent, parse_time
from handoff.interop.importers import ImportReader, open_events

# Milestone slots (indexes into verdicts.MILESTONES): a list per pod is far smaller
# than a dict.
CREATED, BOUND, ACK, ADMITTED, REJECTED, SANDBOX, INITIALIZED = range(7)
STARTED, RUNNING, READY, FINISHED, DELETED = range(7, 12)

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
NODE_DOWN_TAINTS = frozenset({"node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"})
PODGC_PERIOD = 20.0
PODGC_QUARANTINE = 40.0
MAX_CHANGES = 64
CHANGE_FIELDS = 5  # observed, bits, phase, status reason, waiting: see PodState.changes
ROUTINE_REASONS = frozenset(
    {"Pulling", "Pulled", "Created", "Started", "Killing", "BackOff", "SandboxChanged"}
)
DELETING_BIT = v.DELETING_BIT
DISRUPTION_BIT = v.DISRUPTION_BIT


class EventRecord(msgspec.Struct, gc=False):
    # event_key() of the Event object's uid (or namespace/name): repeats update
    # this record. A 36-character uid per event is most of a pod's memory.
    key: int
    reason: str
    type: str
    component: str
    host: str
    message: str
    first: float | None
    last: float | None
    count: int
    observed: float


# PodState.flags: one bit per yes/no fact. A pod's usual combination stays below
# 256, a small int Python shares, so the flags cost a pod nothing but their slot.
HAS_OBJECT = 1  # the Pod object itself was seen (not only its events)
FIRST_BOUND = 2  # nodeName was already set when the object was first seen
FIRST_FRESH = 4  # ... and the kubelet had written no status yet
FIRST_SCHEDULED_COND = 8  # ... and PodScheduled was there
SAW_UNBOUND = 16  # seen without a nodeName at least once
STATIC = 32  # a mirror pod
SCHEDULED_EVENT = 64  # a Scheduled event was seen
FIRST_SEEN_FRESH = HAS_OBJECT | FIRST_BOUND | FIRST_FRESH  # created with a nodeName


class PodExtra(msgspec.Struct, gc=False):
    """The facts most pods never have (a rejection, an eviction, a status message...),
    kept out of PodState so that a pod without them does not pay a slot for each."""

    status_message: str = ""
    terminated: str = ""
    unschedulable: str = ""
    unschedulable_message: str = ""
    disruption: tuple[str, str] | None = None
    rejection: tuple[str, str] | None = None
    evicted_event: tuple[float, str, str] | None = None
    taint_eviction: tuple[float, str] | None = None
    node_not_ready: float | None = None
    event_waiting: str = ""


_NO_EXTRA = PodExtra()  # what a pod without extra facts reads; never written


MILESTONE_COUNT = len(v.MILESTONES)


def _no_milestones() -> list[float | None]:
    return [None] * MILESTONE_COUNT


def _flag(bit: int, doc: str) -> property:
    def get(pod: PodState) -> bool:
        return bool(pod.flags & bit)

    def put(pod: PodState, value: bool) -> None:
        pod.flags = pod.flags | bit if value else pod.flags & ~bit

    return property(get, put, doc=doc)


def _rare(name: str) -> property:
    default = getattr(PodExtra(), name)

    def get(pod: PodState) -> Any:
        extra = pod.extra
        return default if extra is None else getattr(extra, name)

    def put(pod: PodState, value: Any) -> None:
        if pod.extra is None:
            if value == default:
                return
            pod.extra = PodExtra()
        setattr(pod.extra, name, value)

    return property(get, put)


class PodState(msgspec.Struct, gc=False):
    """One pod's handoff as folded so far.

    A struct without GC tracking (it never forms cycles), its yes/no facts as bits
    in ``flags`` and its rare facts in ``extra``: hundreds of thousands of these
    are held at once. The properties below read both as plain attributes.
    """

    uid: str
    namespace: str
    name: str
    node: str = ""
    milestones: list[float | None] = msgspec.field(default_factory=_no_milestones)
    flags: int = 0
    owner: tuple[str, str] | None = None
    rv: int | None = None
    phase: str = ""
    status_reason: str = ""
    waiting: str = ""
    deletion_requested: float | None = None
    started_event: float | None = None
    # A tuple (no object) until the pod's first event, then a short list, not a
    # dict: a pod has a handful of Event objects.
    events: Sequence[EventRecord] = ()
    # Visible changes, flat: (observed, milestone and flag bits, phase, reason,
    # waiting) per watch update, one tuple for all of them; described in words
    # only when shown (report.describe_changes).
    changes: tuple[Any, ...] = ()
    reached: int = 0  # bit per milestone set
    coarse: int = 0  # bit per milestone whose time is an object's (1 s precision)
    last_change: float = 0.0
    extra: PodExtra | None = None

    has_object = _flag(HAS_OBJECT, "the Pod object itself was seen")
    first_bound = _flag(FIRST_BOUND, "nodeName set when first seen")
    first_fresh = _flag(FIRST_FRESH, "no kubelet status when first seen")
    first_scheduled_cond = _flag(FIRST_SCHEDULED_COND, "PodScheduled there when first seen")
    saw_unbound = _flag(SAW_UNBOUND, "seen without a nodeName")
    static = _flag(STATIC, "a mirror pod")
    scheduled_event = _flag(SCHEDULED_EVENT, "a Scheduled event was seen")
    status_message = _rare("status_message")
    terminated = _rare("terminated")
    unschedulable = _rare("unschedulable")
    unschedulable_message = _rare("unschedulable_message")
    disruption = _rare("disruption")
    rejection = _rare("rejection")
    evicted_event = _rare("evicted_event")
    taint_eviction = _rare("taint_eviction")
    node_not_ready = _rare("node_not_ready")
    event_waiting = _rare("event_waiting")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def mark(self, index: int, observed: float | None, own: float | None = None) -> None:
        """Record evidence for a milestone: seen at ``observed``, the object saying ``own``.

        The object's own time (1 s precision) is used only when the watcher saw it
        more than a second late; it then counts as coarse. Milestones keep their
        earliest time, but a precise time inside a coarse second refines it, and a
        coarse time never undercuts a precise one it cannot contradict. So replays
        and watch races change nothing.
        """
        if observed is None:
            return
        current = self.milestones[index]
        # put()'s rule, inlined and split by the kind of evidence: most evidence
        # is precise and repeats what is known, so it returns in a few steps.
        if own is None or own + 1.0 >= observed:  # precise: the watch's time
            if current is not None:
                if self.coarse >> index & 1:  # held: an object's second
                    if observed >= current + 1.0:
                        return
                elif observed >= current:
                    return
            bit = 1 << index
            self.milestones[index] = observed
            self.reached |= bit
            if self.coarse & bit:
                self.coarse &= ~bit
            return
        if current is not None:  # coarse: the object's own second
            if self.coarse >> index & 1:
                if own >= current:
                    return
            elif current < own + 1.0:
                return
        bit = 1 << index
        self.milestones[index] = own
        self.reached |= bit
        self.coarse |= bit

    def put(self, index: int, when: float, coarse: bool) -> None:
        current = self.milestones[index]
        bit = 1 << index
        if current is not None:
            current_coarse = bool(self.coarse & bit)
            if coarse and not current_coarse:
                if current < when + 1.0:
                    return
            elif current_coarse and not coarse:
                if when >= current and not when < current + 1.0:
                    return
            elif when >= current:
                return
        self.milestones[index] = when
        self.reached |= bit
        self.coarse = self.coarse | bit if coarse else self.coarse & ~bit


@dataclass(slots=True)
class NodeState:
    name: str
    exists: bool = False
    deleted: float | None = None
    rv: int | None = None
    ready: str = ""
    # (start, end or None, why): intervals the node was NotReady/Unknown.
    down: list[list[Any]] = field(default_factory=list)
    taints: list[dict[str, Any]] = field(default_factory=list)
    unschedulable: bool = False


@dataclass(slots=True)
class Judgement:
    verdict: str
    reason: str | None
    node_exists: bool | None
    podgc_window: tuple[float, float] | None = None
    node_lost_at: float | None = None


class Timeline:
    """The handoff state of one cluster, folded from its watch events."""

    def __init__(self, cluster: str | None = None) -> None:
        self.cluster = cluster
        self.pods: dict[str, PodState] = {}
        self.by_name: dict[str, str] = {}
        # The kubelet's events about a static pod name its config hash as the uid,
        # not the mirror pod's: hash -> mirror pod uid.
        self.aliases: dict[str, str] = {}
        # Entries merged into another pod (a static pod's config hash into its mirror
        # pod), for a reader that stored them to forget them; it clears the list.
        self.merged: list[str] = []
        self.placeholders = 0  # pods known only by name from their events
        self.nodes: dict[str, NodeState] = {}
        # Whether any Node object was watched: without that, a node's absence
        # proves nothing and "node-missing" is never said.
        self.nodes_known = False
        self.skipped: Counter[str] = Counter()
        self.watch_errors: list[tuple[float, str]] = []
        self.last_observed: float | None = None
        self.events_applied = 0

    # ----------------------------------------------------------------- fold

    def apply(self, event: WatchEvent) -> PodState | None:
        """Fold one watch event; returns the pod it changed, if any."""
        observed = event.at
        if observed is None:
            observed = event.time()
        obj = event.object
        if obj.__class__ is not KubeObject:
            try:
                obj = to_object(obj)
            except ValidationError:
                last = self.last_observed
                if last is None or observed > last:
                    self.last_observed = observed
                self.events_applied += 1
                self.skipped["malformed object"] += 1
                return None
        return self.apply_object(observed, event.type, obj)

    def apply_object(self, observed: float, type_: str, obj: KubeObject) -> PodState | None:
        """``apply`` of an event already read: observed at ``observed`` (epoch seconds)."""
        last = self.last_observed
        if last is None or observed > last:
            self.last_observed = observed
        self.events_applied += 1
        if type_ == "BOOKMARK":
            return None
        if type_ == "ERROR":
            self.watch_errors.append((observed, (obj.message or "")[:200]))
            return None
        kind = obj.kind
        if kind == "Pod":
            return self.apply_pod(observed, type_, obj)
        if kind == "Event":
            return self.apply_event(observed, obj)
        if kind == "Node":
            self.apply_node(observed, type_, obj)
            return None
        self.skipped[kind or "<no kind>"] += 1
        return None

    def apply_pod(self, observed: float, type_: str, obj: KubeObject) -> PodState | None:
        """Fold a Pod update. The hottest code of the fold, hence one flat method:
        the facts the status sets, the milestones the kubelet's status proves and
        the note of a visible change were separate calls once, each costing about
        as much as the few steps it held."""
        meta = obj.metadata
        if meta is None or not meta.name:
            self.skipped["Pod without metadata"] += 1
            return None
        namespace = meta.namespace or "default"
        uid = meta.uid or f"{namespace}/{meta.name}"
        pod = self.pods.get(uid)
        if pod is None:
            pod = self._new_pod(uid, namespace, meta.name)
        elif pod.milestones[DELETED] is not None:
            return None
        rv = meta.resourceVersion  # rv_number(), inlined
        rv = int(rv) if rv.isdigit() else None
        stale = rv is not None and pod.rv is not None and rv <= pod.rv
        if stale and type_ != "DELETED":
            return None
        mark = pod.mark
        if not stale:
            if rv is not None:
                pod.rv = rv
            spec = obj.spec
            node = (spec.nodeName if spec is not None else None) or ""
            status = obj.status
            facts = read_status(status if status.__class__ is Status else None)
            first = not pod.flags & HAS_OBJECT
            if first:
                self._first_sight(pod, observed, meta, node, facts)
            if not node:
                pod.flags |= SAW_UNBOUND
            elif not pod.node:
                self._mark_bound(pod, observed, facts)
            # Share strings that repeat across pods; skip the lookup when nothing changed.
            if node and node != pod.node:
                pod.node = intern(node)
            phase = facts.phase
            if phase and phase != pod.phase:
                pod.phase = phase = intern(phase)
            else:
                phase = pod.phase
            if facts.reason != pod.status_reason:
                pod.status_reason = intern(facts.reason)
            extra = pod.extra
            if extra is not None:
                extra.status_message = facts.message
            elif facts.message:
                pod.status_message = facts.message
            if meta.deletionTimestamp and pod.deletion_requested is None:
                pod.deletion_requested = observed
            if facts.unschedulable:
                pod.unschedulable = facts.unschedulable
                pod.unschedulable_message = facts.unschedulable_message
            if facts.disruption is not None:
                pod.disruption = facts.disruption
            if facts.waiting != pod.waiting:
                pod.waiting = intern(facts.waiting)
            if facts.terminated:
                pod.terminated = facts.terminated
            if phase == "Succeeded" or phase == "Failed":
                mark(FINISHED, observed, facts.latest_finish or facts.start)
            if facts.kubelet_wrote:  # what the kubelet's own status proves
                start = facts.start
                mark(ACK, observed, start)
                if phase == "Failed" and _is_rejection(pod.status_reason, pod.status_message):
                    pod.rejection = (pod.status_reason, _strip_rejection(pod.status_message))
                    mark(REJECTED, observed, start)
                else:
                    mark(ADMITTED, observed, start)
                if facts.sandbox_at is not None:
                    mark(SANDBOX, observed, facts.sandbox_at)
                if facts.initialized_at is not None:
                    mark(INITIALIZED, observed, facts.initialized_at)
                if facts.ready_at is not None:
                    mark(READY, observed, facts.ready_at)
                if facts.all_started_at is not None:
                    mark(STARTED, observed, facts.all_started_at)
                if phase == "Running":
                    # The phase has no timestamp of its own: the containers' start stands
                    # in only when the pod is first seen already running (a list, a late
                    # watch).
                    mark(RUNNING, observed, facts.latest_start if first else None)
        if type_ == "DELETED":
            mark(DELETED, observed)
        # A visible change (a milestone, nodeName set being ``bound``, the phase, the
        # status or waiting reason, a deletion request or a DisruptionTarget as flag
        # bits above the milestones) is remembered; a repeat of the last one is not.
        bits = pod.reached
        if pod.deletion_requested is not None:
            bits |= DELETING_BIT
        extra = pod.extra
        if extra is not None and extra.disruption is not None:
            bits |= DISRUPTION_BIT
        changes = pod.changes
        if (
            changes
            and changes[-4] == bits
            and changes[-3] == pod.phase
            and changes[-2] == pod.status_reason
            and changes[-1] == pod.waiting
        ):
            return pod
        pod.last_change = observed
        entry = (observed, bits, pod.phase, pod.status_reason, pod.waiting)
        if len(changes) < MAX_CHANGES * CHANGE_FIELDS:
            pod.changes = changes + entry
        else:  # keep the latest state; the middle of a long history goes
            pod.changes = changes[:-CHANGE_FIELDS] + entry
        return pod

    def _new_pod(self, uid: str, namespace: str, name: str) -> PodState:
        # Namespaces repeat across pods: share them.
        # The milestones given rather than made by the default factory: a call less.
        pod = PodState(uid, intern(namespace), name, "", [None] * MILESTONE_COUNT)
        self.pods[uid] = pod
        key = f"{namespace}/{name}"
        if self.placeholders:
            orphan_events = self.pods.pop(f"name:{key}", None)
            if orphan_events is not None:
                self.placeholders -= 1
                _merge_events(pod, orphan_events)
        self.by_name[key] = uid
        return pod

    def _first_sight(
        self,
        pod: PodState,
        observed: float,
        meta: ObjectMeta,
        node: str,
        facts: StatusFacts,
    ) -> None:
        flags = pod.flags | HAS_OBJECT
        if node:
            flags |= FIRST_BOUND
        if facts.scheduled != "":
            flags |= FIRST_SCHEDULED_COND
        if not facts.kubelet_wrote:
            flags |= FIRST_FRESH
        pod.mark(CREATED, observed, timestamp(meta.creationTimestamp))
        if meta.ownerReferences:
            owner = meta.ownerReferences[0]
            pod.owner = (intern(owner.kind), intern(owner.name))
        notes = meta.annotations
        static = (notes is not None and (notes.mirror is not None or notes.source == "file")) or (
            pod.owner is not None and pod.owner[0] == "Node"
        )
        pod.flags = flags | STATIC if static else flags
        if static and notes is not None:
            self._alias_static(pod, notes)

    def _alias_static(self, pod: PodState, notes: Annotations) -> None:
        for alias in (notes.mirror, notes.hash):
            if alias and alias != pod.uid:
                self.aliases[alias] = pod.uid
                earlier = self.pods.get(alias)
                if earlier is not None and not earlier.flags & HAS_OBJECT:
                    del self.pods[alias]
                    self.merged.append(alias)
                    _merge_events(pod, earlier)

    @staticmethod
    def _mark_bound(pod: PodState, observed: float, facts: StatusFacts) -> None:
        if facts.scheduled == "True":
            pod.mark(BOUND, observed, facts.scheduled_at)
        elif (
            pod.flags & FIRST_FRESH
            and pod.flags & FIRST_BOUND
            and pod.milestones[CREATED] is not None
        ):
            pod.put(BOUND, pod.milestones[CREATED], bool(pod.coarse & (1 << CREATED)))
        else:
            pod.mark(BOUND, observed, facts.start)

    # --------------------------------------------------------------- events

    def apply_event(self, observed: float, obj: KubeObject) -> PodState | None:
        facts = read_event(obj)
        if facts is None or not facts.reason:
            self.skipped["Event without regarding/reason"] += 1
            return None
        if facts.kind == "Node":
            self._apply_node_event(observed, facts)
            return None
        if facts.kind != "Pod" or not facts.name:
            self.skipped[f"Event about {facts.kind or 'nothing'}"] += 1
            return None
        uid = facts.uid
        if uid:  # _pod_for_event's common case, inlined
            uid = self.aliases.get(uid, uid)
            pod = self.pods.get(uid)
            if pod is None:
                pod = self._pod_for_event(facts)
        else:
            pod = self._pod_for_event(facts)
        key = crc32(facts.key.encode())  # event_key(), inlined
        events = pod.events
        for record in events:
            if record.key == key:
                if _not_newer(facts, record):
                    return None
                _update_record(record, facts)
                break
        else:
            # Reasons, sources and routine messages repeat across pods: share them.
            # Other messages mostly name the pod; interning them costs more than it saves.
            message = facts.message
            type_ = facts.type
            component = facts.component
            host = facts.host
            record = EventRecord(
                key,
                intern(facts.reason),
                "Normal" if type_ == "Normal" else intern(type_),
                KUBELET if component == KUBELET else intern(component),
                pod.node if host == pod.node else intern(host),  # the pod's node, shared
                intern(message) if facts.reason in ROUTINE_REASONS else message,
                facts.first,
                facts.last,
                facts.count,
                observed,
            )
            if events:
                events.append(record)
            else:
                pod.events = [record]
        # What the event says about the pod.
        reason = facts.reason
        first = facts.first
        when = first if first is not None and first + 1.0 < observed else observed  # seen_at
        if reason == "Scheduled":
            pod.flags |= SCHEDULED_EVENT
            pod.mark(BOUND, observed, first)
            if not pod.node:
                pod.node = _assigned_node(facts.message)
        elif reason == "FailedScheduling":
            pod.unschedulable = pod.unschedulable or "Unschedulable"
            pod.unschedulable_message = facts.message
        elif reason == "TaintManagerEviction":
            pod.taint_eviction = (when, facts.message)
        elif reason == "NodeNotReady" and (pod.node_not_ready is None or when < pod.node_not_ready):
            pod.node_not_ready = when
        if facts.component == KUBELET:
            if not pod.node and facts.host:
                pod.node = facts.host  # the kubelet that wrote it is the one it was handed to
            pod.mark(ACK, observed, first)
            if facts.type == "Warning" and v.is_admission_reason(reason):
                pod.rejection = pod.rejection or (reason, facts.message)
                pod.mark(REJECTED, observed, first)
            elif reason == "Evicted":
                pod.evicted_event = (when, reason, facts.message)
            else:
                pod.mark(ADMITTED, observed, first)
                if reason == "Started":
                    if pod.started_event is None or when < pod.started_event:
                        pod.started_event = when
                elif reason not in ROUTINE_REASONS or reason == "BackOff":
                    self._events_only_facts(pod, facts)
        if observed > pod.last_change:
            pod.last_change = observed
        return pod

    def _pod_for_event(self, facts: EventFacts) -> PodState:
        """The pod an event regards, made when it is not known yet."""
        if facts.uid:
            uid = self.aliases.get(facts.uid, facts.uid)
            pod = self.pods.get(uid)
            if pod is None:
                pod = PodState(uid, intern(facts.namespace or "default"), facts.name)
                self.pods[uid] = pod
                self.by_name.setdefault(pod.key, uid)
            return pod
        key = f"{facts.namespace or 'default'}/{facts.name}"
        uid = self.by_name.get(key)
        if uid is not None:
            return self.pods[uid]
        placeholder = f"name:{key}"
        pod = self.pods.get(placeholder)
        if pod is None:
            pod = PodState(placeholder, intern(facts.namespace or "default"), facts.name)
            self.pods[placeholder] = pod
            self.placeholders += 1
        return pod

    @staticmethod
    def _events_only_facts(pod: PodState, facts: EventFacts) -> None:
        """What the kubelet's events alone say, for pods whose object we never see."""
        if facts.reason in ("BackOff", "Failed"):
            message = facts.message
            if "pulling image" in message or "ImagePullBackOff" in message:
                pod.event_waiting = "ImagePullBackOff"
            elif "ErrImagePull" in message:
                pod.event_waiting = pod.event_waiting or "ErrImagePull"
            elif "restarting failed container" in message:
                pod.event_waiting = "CrashLoopBackOff"
        elif facts.reason in ("FailedMount", "FailedAttachVolume"):
            pod.event_waiting = pod.event_waiting or facts.reason

    # ---------------------------------------------------------------- nodes

    def apply_node(self, observed: float, type_: str, obj: KubeObject) -> None:
        meta = obj.metadata
        if meta is None or not meta.name:
            self.skipped["Node without metadata"] += 1
            return
        node = self.nodes.get(meta.name)
        if node is None:
            node = self.nodes[meta.name] = NodeState(meta.name)
        rv = rv_number(meta)
        if type_ != "DELETED" and node.rv is not None and rv is not None and rv <= node.rv:
            return
        node.rv = rv if rv is not None else node.rv
        self.nodes_known = True
        if type_ == "DELETED":
            node.exists = False
            node.deleted = node.deleted or observed
            _close_down(node, observed)
            return
        node.exists = True
        node.deleted = None
        spec = obj.spec
        node.unschedulable = bool(spec is not None and spec.unschedulable)
        node.taints = [_taint(t) for t in (spec.taints or [])] if spec is not None else []
        status = obj.status if obj.status.__class__ is Status else None
        ready = _condition(status, "Ready")
        down_taint = next((t for t in node.taints if t["key"] in NODE_DOWN_TAINTS), None)
        if ready is not None:
            node.ready = ready.status
        if (ready is not None and node.ready != "True") or down_taint is not None:
            since = timestamp(ready.lastTransitionTime) if ready else None
            if since is None and down_taint is not None:
                since = timestamp(down_taint["timeAdded"])
            why = f"Ready={node.ready}" if ready else down_taint["key"]
            _open_down(node, seen_at(observed, since), why)
        elif ready is not None:
            _close_down(node, seen_at(observed, timestamp(ready.lastTransitionTime)))

    def _apply_node_event(self, observed: float, facts: EventFacts) -> None:
        if facts.reason != "NodeNotReady":
            return
        node = self.nodes.get(facts.name)
        if node is None:
            node = self.nodes.setdefault(facts.name, NodeState(facts.name))
        _open_down(node, seen_at(observed, facts.first), "NodeNotReady event")

    # ------------------------------------------------------------- judgement

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
        x = pod.extra or _NO_EXTRA  # the rare facts, read directly: judged for every pod
        exists = self.node_exists(pod.node, m[DELETED]) if pod.node else None
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
        if pod.phase == "Failed" and pod.status_reason == "Evicted" and x.rejection is None:
            return v.EVICTED, "Evicted"  # the kubelet's own word beats TerminationByKubelet
        if disruption[0] in EVICTION_DISRUPTIONS:
            return v.EVICTED, disruption[0]
        if x.taint_eviction is not None:
            return v.EVICTED, "TaintManagerEviction"
        if x.evicted_event is not None and (m[ADMITTED] is not None or m[RUNNING] is not None):
            return v.EVICTED, "Evicted"
        if m[DELETED] is not None and pod.node and exists is False and m[ACK] is None:
            return v.PODGC_DELETED, "orphaned"
        return None

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
            for start, stop, _why in node.down:
                if start <= end and (stop is None or stop >= bound):
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


def _deleted_before_it_finished(pod: PodState) -> bool:
    """A deletion caused the end (a person, a controller) rather than following it."""
    asked = pod.deletion_requested or pod.milestones[DELETED]
    if asked is None:
        return False
    finished = pod.milestones[FINISHED]
    return finished is None or asked <= finished


def _condition(status: Status | None, kind: str) -> Condition | None:
    if status is None or not status.conditions:
        return None
    return next((c for c in status.conditions if c.type == kind), None)


def _is_rejection(reason: str, message: str) -> bool:
    return message.startswith(v.REJECTION_PREFIX) or v.is_admission_reason(reason)


def _strip_rejection(message: str) -> str:
    return message[len(v.REJECTION_PREFIX) :] if message.startswith(v.REJECTION_PREFIX) else message


def _assigned_node(message: str) -> str:
    # "Successfully assigned default/web-1 to worker-3"
    marker = " to "
    return message.rsplit(marker, 1)[1].strip() if marker in message else ""


def _taint(raw: Taint) -> dict[str, Any]:
    return {
        "key": raw.key,
        "value": raw.value or "",
        "effect": raw.effect,
        "timeAdded": raw.timeAdded,
    }


def _open_down(node: NodeState, since: float, why: str) -> None:
    if node.down and node.down[-1][1] is None:
        if since < node.down[-1][0]:
            node.down[-1][0] = since
        return
    if node.down and node.down[-1][0] == since:
        node.down[-1][1] = None
        return
    node.down.append([since, None, why])


def _close_down(node: NodeState, when: float) -> None:
    if node.down and node.down[-1][1] is None:
        node.down[-1][1] = max(when, node.down[-1][0])


def event_key(uid: str) -> int:
    """A stable 32-bit key for an Event object: the same in every process (unlike
    ``hash``), so a restored snapshot still recognises repeats. A clash would need
    two of one pod's few Event objects to share it."""
    return zlib.crc32(uid.encode())


def _update_record(record: EventRecord, facts: EventFacts) -> None:
    """A repeat of the same Event object: count, times and (combined) message move on."""
    if facts.first is not None and (record.first is None or facts.first < record.first):
        record.first = facts.first
    record.last = facts.last
    record.count = facts.count
    if facts.message != record.message:
        record.message = facts.message
    if facts.type != record.type:
        record.type = intern(facts.type)


def _not_newer(facts: EventFacts, record: EventRecord) -> bool:
    if facts.count != record.count:
        return facts.count < record.count
    return (facts.last or 0.0) <= (record.last or 0.0)


def _merge_events(pod: PodState, placeholder: PodState) -> None:
    """Events seen (by name) before their pod: hand their facts to the pod."""
    known = {e.key for e in pod.events}
    added = [e for e in placeholder.events if e.key not in known]
    if added:
        pod.events = [*pod.events, *added]
    for index, when in enumerate(placeholder.milestones):
        if when is not None:
            pod.put(index, when, bool(placeholder.coarse & (1 << index)))
    pod.flags |= placeholder.flags & SCHEDULED_EVENT
    for attr in (
        "rejection",
        "evicted_event",
        "taint_eviction",
        "node_not_ready",
        "event_waiting",
        "started_event",
        "unschedulable",
        "unschedulable_message",
    ):
        value = getattr(placeholder, attr)
        if value:
            setattr(pod, attr, value)
    pod.node = pod.node or placeholder.node


def fold(
    events: Iterable[WatchEvent], cluster: str | None = None, until: float | None = None
) -> Timeline:
    """Fold watch events; with ``until``, only those observed up to that time."""
    timeline = Timeline(cluster)
    apply = timeline.apply
    with paused_gc():
        if isinstance(events, TraceReader):
            _fold_reader(timeline, events, until)
        elif until is None:
            for event in events:
                apply(event)
        else:
            for event in events:
                if event.time() > until:
                    continue
                apply(event)
    return timeline


def _fold_reader(timeline: Timeline, reader: TraceReader, until: float | None) -> None:
    """A trace reader hands each event's parts straight to the fold (``TraceReader.feed``)."""
    apply = timeline.apply_object
    if until is None:
        reader.feed(apply)
        return

    def apply_until(observed: float, type_: str, obj: KubeObject) -> None:
        if observed <= until:
            apply(observed, type_, obj)

    reader.feed(apply_until)


def fold_trace(
    path: str | Path, at: float | str | None = None, stuck_after: float = 60.0
) -> dict[str, Any]:
    """Offline triage of a trace file: the same JSON ``manage.py triage`` prints."""
    when = parse_time(at) if isinstance(at, str) else at
    timeline, reader = fold_file(path, until=when)
    return build_report(timeline, at=when, stuck_after=stuck_after, errors=reader.errors)


def fold_file(
    path: str | Path, until: float | None = None
) -> tuple[Timeline, TraceReader | ImportReader]:
    """Fold a whole trace file — or kubectl output, a watch stream, an audit log (the
    importers tell them apart); the reader reports bad lines and skipped kinds."""
    reader = open_events(path)
    timeline = fold(reader, until=until)
    timeline.cluster = reader.header.cluster if reader.header else None
    timeline.skipped.update(reader.skipped)
    return timeline, reader


class _State(msgspec.Struct, gc=False):
    """A Timeline as plain data: what a snapshot stores."""

    version: int
    cluster: str | None
    pods: list[PodState]
    nodes: list[NodeState]
    by_name: dict[str, str]
    aliases: dict[str, str]
    placeholders: int
    nodes_known: bool
    skipped: dict[str, int]
    watch_errors: list[tuple[float, str]]
    last_observed: float | None
    events_applied: int


# 2: PodState as a struct with flags, ``extra`` and flat ``changes``.
STATE_VERSION = 2


def dump_state(timeline: Timeline) -> bytes:
    """The timeline as MessagePack: data only, safe to load from a shared store."""
    return msgspec.msgpack.encode(
        _State(
            STATE_VERSION,
            timeline.cluster,
            list(timeline.pods.values()),
            list(timeline.nodes.values()),
            timeline.by_name,
            timeline.aliases,
            timeline.placeholders,
            timeline.nodes_known,
            dict(timeline.skipped),
            timeline.watch_errors,
            timeline.last_observed,
            timeline.events_applied,
        )
    )


def load_state(blob: bytes) -> Timeline:
    """A timeline from ``dump_state``; raises ValueError for anything else."""
    try:
        state = msgspec.msgpack.decode(blob, type=_State)
    except msgspec.DecodeError as exc:
        raise ValueError(f"not a timeline snapshot: {exc}") from exc
    if state.version != STATE_VERSION:
        raise ValueError(f"snapshot version {state.version}, expected {STATE_VERSION}")
    timeline = Timeline(state.cluster)
    for pod in state.pods:
        if not pod.events:
            pod.events = ()  # as a fresh pod has them: no empty list per pod
    timeline.pods = {pod.uid: pod for pod in state.pods}
    timeline.nodes = {node.name: node for node in state.nodes}
    timeline.by_name = state.by_name
    timeline.aliases = state.aliases
    timeline.placeholders = state.placeholders
    timeline.nodes_known = state.nodes_known
    timeline.skipped = Counter(state.skipped)
    timeline.watch_errors = state.watch_errors
    timeline.last_observed = state.last_observed
    timeline.events_applied = state.events_applied
    return timeline
