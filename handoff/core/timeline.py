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

from collections import Counter
from collections.abc import Iterable
from sys import intern
from zlib import crc32

from handoff.core import verdicts as v
from handoff.core.facts import (
    KUBELET,
    EventFacts,
    StatusFacts,
    assigned_node,
    is_rejection,
    read_event,
    read_status,
    rv_number,
    strip_rejection,
)
from handoff.core.gcpause import paused_gc
from handoff.core.judge import Judging
from handoff.core.owners import WORKLOAD_KINDS, OwnerBook
from handoff.core.podstate import (
    ACK,
    ADMITTED,
    BOUND,
    BOUND_BIT,
    CHANGE_FIELDS,
    CREATED,
    DELETED,
    DELETING_BIT,
    DISRUPTION_BIT,
    FINISHED,
    HAS_OBJECT,
    INITIALIZED,
    MAX_CHANGES,
    MILESTONE_COUNT,
    READY,
    REJECTED,
    RUNNING,
    SANDBOX,
    SAW_UNBOUND,
    SCHEDULED_EVENT,
    STARTED,
    EventRecord,
    NodeState,
    PodState,
    close_down,
    first_sight,
    fold_node_event,
    fold_node_status,
    mark_bound,
    merge_events,
    namesake_at,
    not_newer,
    note_deletion,
    note_event_waiting,
    update_record,
)
from handoff.core.schema import (
    Annotations,
    KubeObject,
    Status,
    ValidationError,
    to_object,
)
from handoff.core.trace import TraceReader, WatchEvent

# "Cancelling deletion of Pod ns/name": the taint went in time, nothing was evicted
# (taint_manager.go emitCancelPodDeletionEvent, 1.20-1.28; pkg/controller/tainteviction 1.29+).
CANCELLED = "Cancelling"
ROUTINE_REASONS = frozenset(
    {"Pulling", "Pulled", "Created", "Started", "Killing", "BackOff", "SandboxChanged"}
)


class Timeline(Judging):
    """The handoff state of one cluster, folded from its watch events; judged through
    ``Judging`` (``timeline.judge(pod, now)``)."""

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
        # Workloads: their controllers' failures, Deployments behind ReplicaSets, how
        # their pods ended (core/owners.py).
        self.owners = OwnerBook()

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
        """Fold a Pod update. The hottest code of the fold, hence flat: the facts the
        status sets are inlined (a call each cost about as much as the few steps it
        held); what the kubelet's own status proves and the note of a visible change
        are one call each (``kubelet_status``, ``note_change``)."""
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
                notes = meta.annotations
                if first_sight(pod, observed, meta, node, facts) and notes is not None:
                    self._alias_static(pod, notes)
                if pod.owner is not None:
                    labels = meta.labels
                    template_hash = (labels.template_hash if labels is not None else None) or ""
                    self.owners.note_pod(pod, template_hash, pod.milestones[CREATED])
            if not node:
                pod.flags |= SAW_UNBOUND
            elif not pod.reached & BOUND_BIT:  # not ``pod.node``: an event may have set it
                mark_bound(pod, observed, facts)
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
            if meta.deletionTimestamp:
                note_deletion(pod, observed, meta)
            if facts.unschedulable:
                pod.unschedulable = facts.unschedulable
                pod.unschedulable_message = facts.unschedulable_message
            if facts.disruption is not None:  # ("", "") once it is False again (P8)
                pod.disruption = facts.disruption if facts.disruption[0] else None
            if facts.waiting != pod.waiting:
                pod.waiting = intern(facts.waiting)
            if facts.terminated:
                pod.terminated = facts.terminated
            if phase == "Succeeded" or phase == "Failed":
                mark(FINISHED, observed, facts.latest_finish or facts.start)
            if facts.kubelet_wrote:
                kubelet_status(pod, observed, facts, phase, first)
        if type_ == "DELETED":
            mark(DELETED, observed)
        note_change(pod, observed)
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
                merge_events(pod, orphan_events)
        self.by_name[key] = uid
        return pod

    def _alias_static(self, pod: PodState, notes: Annotations) -> None:
        for alias in (notes.mirror, notes.hash):
            if alias and alias != pod.uid:
                self.aliases[alias] = pod.uid
                earlier = self.pods.get(alias)
                if earlier is not None and not earlier.flags & HAS_OBJECT:
                    del self.pods[alias]
                    self.merged.append(alias)
                    merge_events(pod, earlier)

    # --------------------------------------------------------------- events

    def apply_event(self, observed: float, obj: KubeObject) -> PodState | None:
        facts = read_event(obj)
        if facts is None or not facts.reason:
            self.skipped["Event without regarding/reason"] += 1
            return None
        if facts.kind == "Node":
            self._apply_node_event(observed, facts)
            return None
        if facts.kind in WORKLOAD_KINDS:
            self.owners.apply_event(observed, facts)
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
            if pod is None:
                return None
        if not record_event(pod, facts, observed):
            return None
        # What the event says about the pod.
        reason = facts.reason
        first = facts.first
        when = first if first is not None and first + 1.0 < observed else observed  # seen_at
        if reason == "Scheduled":
            pod.flags |= SCHEDULED_EVENT
            pod.mark(BOUND, observed, first)
            if not pod.node:
                pod.node = assigned_node(facts.message)
        elif reason == "FailedScheduling":
            pod.unschedulable = pod.unschedulable or "Unschedulable"
            pod.unschedulable_message = facts.message
        elif reason == "Preempted" and pod.disruption is None:  # before 1.26 the only sign
            pod.disruption = ("PreemptionByScheduler", facts.message)
        elif reason == "TaintManagerEviction" and not facts.message.startswith(CANCELLED):
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
                    note_event_waiting(pod, facts)
        # After a deletion request only the kubelet's events are news of the pod (judge:
        # kubelet-silent): the scheduler writes Scheduled asynchronously, and on v1.20.2
        # it was seen arriving after a delete made the moment the pod was bound.
        if observed > pod.last_change and (
            pod.deletion_requested is None or facts.component == KUBELET
        ):
            pod.last_change = observed
        return pod

    def _pod_for_event(self, facts: EventFacts) -> PodState | None:
        """The pod an event regards, made when it is not known yet; None for an Event
        without a uid that is older than every pod of its name still known."""
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
            pod = namesake_at(self.pods[uid], facts, self.pods.values())
            if pod is None:
                self.skipped["Event about an earlier pod of that name"] += 1
            return pod
        placeholder = f"name:{key}"
        pod = self.pods.get(placeholder)
        if pod is None:
            pod = PodState(placeholder, intern(facts.namespace or "default"), facts.name)
            self.pods[placeholder] = pod
            self.placeholders += 1
        return pod

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
            close_down(node, observed)
            return
        fold_node_status(node, observed, obj)

    def _apply_node_event(self, observed: float, facts: EventFacts) -> None:
        if facts.reason == "NodeNotReady" or facts.reason == "NodeReady":
            node = self.nodes.get(facts.name)
            if node is None:
                node = self.nodes.setdefault(facts.name, NodeState(facts.name))
            fold_node_event(node, observed, facts)


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


def kubelet_status(
    pod: PodState, observed: float, facts: StatusFacts, phase: str, first: bool
) -> None:
    """The milestones a status the kubelet wrote proves (``facts.kubelet_wrote``)."""
    mark = pod.mark
    start = facts.start
    mark(ACK, observed, start)
    if phase == "Failed" and is_rejection(pod.status_reason, pod.status_message):
        pod.rejection = (pod.status_reason, strip_rejection(pod.status_message))
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
        # The phase has no timestamp of its own: the containers' start stands in only
        # when the pod is first seen already running (a list, a late watch).
        mark(RUNNING, observed, facts.latest_start if first else None)


def note_change(pod: PodState, observed: float) -> None:
    """Remember a visible change (a milestone, nodeName set being ``bound``, the phase,
    the status or waiting reason, a deletion request or a DisruptionTarget as flag bits
    above the milestones); a repeat of the last one is not."""
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
        return
    pod.last_change = observed
    entry = (observed, bits, pod.phase, pod.status_reason, pod.waiting)
    if len(changes) < MAX_CHANGES * CHANGE_FIELDS:
        pod.changes = changes + entry
    else:  # keep the latest state; the middle of a long history goes
        pod.changes = changes[:-CHANGE_FIELDS] + entry


def record_event(pod: PodState, facts: EventFacts, observed: float) -> bool:
    """Keep an Event among the pod's (a repeat updates its record); False when it is
    not newer than the record already kept."""
    key = crc32(facts.key.encode())  # event_key(), inlined
    events = pod.events
    for record in events:
        if record.key == key:
            if not_newer(facts, record):
                return False
            update_record(record, facts)
            return True
    # Reasons, sources and routine messages repeat across pods: share them. Other
    # messages mostly name the pod; interning them costs more than it saves.
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
    return True
