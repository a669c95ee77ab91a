"""A pod reduced to what the fleet and nodes pages aggregate, from either kind of source."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from handoff.core.durations import not_observed, pod_durations
from handoff.core.podstate import CREATED, PodState
from handoff.core.timeline import Timeline
from handoff.core.trace import format_time
from handoff.core.views import stages


@dataclass(slots=True)
class PodRow:
    namespace: str
    name: str
    uid: str | None
    node: str | None
    node_exists: bool | None
    verdict: str
    reason: str | None
    binding: str | None
    created: str  # RFC 3339 (sorts as text), "" when unknown
    durations: dict[str, float | None]
    # The stage bars, made only for the pods a chart draws (``stage_bars``).
    stage_source: Callable[[], list[dict[str, Any]]] = field(repr=False, default=list)
    podgc: dict[str, Any] | None = None
    # The durations whose end happened but which have no figure (durations.not_observed).
    unobserved: tuple[str, ...] = ()

    def stage_bars(self) -> list[dict[str, Any]]:
        return self.stage_source()


def row_from_view(view: dict[str, Any]) -> PodRow:
    """A row of a stored pod view (the live store's JSON)."""
    bars = view.get("stages") or []
    values = view.get("durations") or {}
    return PodRow(
        view["namespace"],
        view["name"],
        view.get("uid"),
        view.get("node"),
        view.get("node_exists"),
        view["verdict"],
        view.get("reason"),
        view.get("binding"),
        (view.get("milestones") or {}).get("created") or "",
        values,
        lambda: bars,
        view.get("podgc"),
        tuple(not_observed(view.get("milestones") or {}, values)),
    )


def row_from_pod(timeline: Timeline, pod: PodState, now: float, stuck_after: float) -> PodRow:
    """A row straight from the fold's state: no full pod view needed."""
    judged = timeline.judge(pod, now, stuck_after)
    created = pod.milestones[CREATED]
    window = judged.podgc_window
    milestones = pod.milestones
    values = pod_durations(pod)
    return PodRow(
        pod.namespace,
        pod.name,
        None if pod.uid.startswith("name:") else pod.uid,
        pod.node or None,
        judged.node_exists,
        judged.verdict,
        judged.reason,
        timeline.binding(pod),
        format_time(created) if created is not None else "",
        values,
        lambda: stages(milestones, now),
        {"earliest": format_time(window[0]), "latest": format_time(window[1])} if window else None,
        tuple(not_observed(milestones, values)),
    )
