"""A replay's checkpoints as objects shared between them, not as serialised copies.

A checkpoint is the fold's state after a number of events. Its pods and nodes are frozen:
never handed to the fold, never changed. A pod the fold did not touch between two
checkpoints is the same frozen object in both, so a checkpoint costs a dict slot per pod
plus a copy of each pod changed since the one before (not a whole serialised timeline).

Seeking thaws a checkpoint: a new ``Timeline`` whose pods dict is a copy of the
checkpoint's (the same frozen objects), nodes and small books copies of their own; a pod
the segment's events touch is copied just before the first of them is folded
(``copy_touched``), so the pods the seek does not reach stay the frozen ones (whose
facts the replay's pages keep by their ids). The checkpoint is never changed. Which
pods a segment touches, and where first, is what ``Timeline.apply`` returned while the
segment was first folded: the fold is deterministic, so folding it again from the same
state touches the same pods.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from dataclasses import dataclass

import msgspec

from handoff.core.owners import OwnerBook, OwnerData
from handoff.core.podstate import NodeState, PodState
from handoff.core.timeline import Timeline

_encode = msgspec.msgpack.Encoder().encode
_pod_decoder = msgspec.msgpack.Decoder(PodState)
_node_decoder = msgspec.msgpack.Decoder(NodeState)
_owners_decoder = msgspec.msgpack.Decoder(OwnerData)


def copy_pod(pod: PodState) -> PodState:
    """A deep copy (as ``snapshot.load_state`` makes pods: no event list when empty)."""
    copy = _pod_decoder.decode(_encode(pod))
    if not copy.events:
        copy.events = ()
    return copy


def copy_node(node: NodeState) -> NodeState:
    return _node_decoder.decode(_encode(node))


def copy_owners(owners: OwnerBook) -> OwnerBook:
    return OwnerBook(_owners_decoder.decode(_encode(owners.data())))


@dataclass(slots=True)
class Checkpoint:
    """The fold's state after ``position`` events, frozen. Filled in once the events up to
    the next checkpoint are folded: ``touched``, the uids of the pods they change, and
    ``removed``, the uids they take out of ``pods`` (placeholders merged into a pod)."""

    position: int
    cluster: str | None
    pods: dict[str, PodState]
    nodes: dict[str, NodeState]
    by_name: dict[str, str]
    aliases: dict[str, str]
    merged: list[str]
    placeholders: int
    nodes_known: bool
    skipped: Counter[str]
    watch_errors: list[tuple[float, str]]
    last_observed: float | None
    events_applied: int
    owners: OwnerBook
    touched: frozenset[str] = frozenset()
    removed: frozenset[str] = frozenset()
    # ``touched`` in the order the slot's events first touch them, and the index (in the
    # trace's events) of each one's first touch: a seek copies only those it folds.
    first_touched: tuple[str, ...] = ()
    first_touch_at: tuple[int, ...] = ()


def freeze(
    timeline: Timeline, position: int, before: Checkpoint | None, touched: set[str]
) -> Checkpoint:
    """The live ``timeline`` as a checkpoint. Pods not in ``touched`` (the uids changed
    since ``before``) and nodes equal to ``before``'s are shared with it, not copied."""
    old_pods = before.pods if before is not None else {}
    old_nodes = before.nodes if before is not None else {}
    pods = {}
    for uid, pod in timeline.pods.items():
        kept = old_pods.get(uid)
        pods[uid] = kept if kept is not None and uid not in touched else copy_pod(pod)
    nodes = {}
    for name, node in timeline.nodes.items():
        kept_node = old_nodes.get(name)
        nodes[name] = kept_node if kept_node == node else copy_node(node)
    return Checkpoint(
        position,
        timeline.cluster,
        pods,
        nodes,
        dict(timeline.by_name),
        dict(timeline.aliases),
        list(timeline.merged),
        timeline.placeholders,
        timeline.nodes_known,
        Counter(timeline.skipped),
        list(timeline.watch_errors),
        timeline.last_observed,
        timeline.events_applied,
        copy_owners(timeline.owners),
    )


def thaw(checkpoint: Checkpoint, copied: bool = True) -> Timeline:
    """A timeline equal to the checkpoint's state that the segment after it can be
    folded into: what that segment changes is copied, the rest is shared (read-only).
    ``copied=False``: no pod is copied yet; ``copy_touched`` copies those the events to
    be folded touch, before they are."""
    timeline = Timeline(checkpoint.cluster)
    pods = dict(checkpoint.pods)
    if copied:
        for uid in checkpoint.touched:
            pod = pods.get(uid)
            if pod is not None:
                pods[uid] = copy_pod(pod)
    timeline.pods = pods
    timeline.nodes = {name: copy_node(node) for name, node in checkpoint.nodes.items()}
    timeline.by_name = dict(checkpoint.by_name)
    timeline.aliases = dict(checkpoint.aliases)
    timeline.merged = list(checkpoint.merged)
    timeline.placeholders = checkpoint.placeholders
    timeline.nodes_known = checkpoint.nodes_known
    timeline.skipped = Counter(checkpoint.skipped)
    timeline.watch_errors = list(checkpoint.watch_errors)
    timeline.last_observed = checkpoint.last_observed
    timeline.events_applied = checkpoint.events_applied
    timeline.owners = copy_owners(checkpoint.owners)
    return timeline


def copy_touched(timeline: Timeline, checkpoint: Checkpoint, low: int, high: int) -> None:
    """Before the events ``[low, high)`` are folded into a timeline thawed with
    ``copied=False`` (and folded up to ``low``): copies of the checkpoint's pods they
    touch first. A pod not yet touched stays the frozen one, whose facts the pages keep
    by its id (webui/detail/replayed.py): a seek early in a slot copies few pods."""
    at = checkpoint.first_touch_at
    pods, frozen = timeline.pods, checkpoint.pods
    for uid in checkpoint.first_touched[bisect_left(at, low) : bisect_left(at, high)]:
        pod = pods.get(uid)
        if pod is not None and pod is frozen.get(uid):
            pods[uid] = copy_pod(pod)
