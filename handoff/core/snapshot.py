"""A ``Timeline`` as MessagePack and back: what the live fold saves and a replay or
a restart loads. Data only, so a snapshot read from a shared store runs no code.

Apart from ``podstate`` because it builds a ``Timeline`` (which imports ``podstate``).
"""

from __future__ import annotations

from collections import Counter

import msgspec

from handoff.core.owners import OwnerBook, OwnerData
from handoff.core.podstate import NodeState, PodState
from handoff.core.timeline import Timeline


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
    # Absent from snapshots made before owners were kept: an empty book.
    owners: OwnerData | None = None


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
            timeline.owners.data(),
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
    timeline.owners = OwnerBook(state.owners)
    return timeline
