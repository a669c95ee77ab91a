"""Where a detail page's data comes from: a live cluster's store, or a trace at a time.

Both answer in the live API's JSON shapes (pod views from ``handoff.core.views.pod_view``), so
a page cannot tell a replayed cluster from a live one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter, methodcaller
from typing import Any

import redis

from handoff import conf
from handoff.core import verdicts as v
from handoff.core.gcpause import paused_gc
from handoff.core.histogram import Histogram
from handoff.core.timeline import Timeline
from handoff.core.trace import format_time
from handoff.core.views import pod_view, sort_key
from handoff.live import queries
from handoff.live.pages.rows import PodRow, row_from_pod, row_from_view
from handoff.live.queries import pick, with_others
from handoff.offline.replay import ReplayState


def client() -> redis.Redis:
    """This process's client for the detail pages."""
    return conf.redis_client(timeout=10, shared=True)


class LiveSource:
    """A watched cluster: views as the fold worker stored them."""

    def __init__(self, cluster: str, redis_client: redis.Redis | None = None) -> None:
        self.cluster = cluster
        self.client = redis_client or client()

    def exists(self) -> bool:
        return queries.exists(self.client, self.cluster)

    def fold(self) -> dict[str, Any]:
        return queries.fold_nodes(self.client, self.cluster)

    def pod(self, namespace: str, name: str, uid: str | None) -> dict[str, Any] | None:
        return queries.pod(self.client, self.cluster, namespace, name, uid)

    def rows(self) -> Iterator[PodRow]:
        for view in queries.all_views(self.client, self.cluster):
            yield row_from_view(view)

    def handed(self) -> dict[str, dict[str, int]]:
        return queries.handed(self.client, self.cluster)

    def on_missing_nodes(self, nodes: list[str]) -> Iterator[PodRow]:
        for view in queries.on_missing_nodes(self.client, self.cluster, nodes):
            yield row_from_view(view)

    def fleet_kept(self, lanes: int) -> dict[str, Any]:
        return queries.fleet_kept(self.client, self.cluster, lanes)

    def node_histograms(self, nodes: list[str]) -> dict[str, dict[str, Histogram]]:
        return queries.node_histograms(self.client, self.cluster, nodes)


class ReplaySource:
    """A trace folded to ``at``. Use as a context manager: the folded timeline is shared
    by every request on this trace and held for this one until the block ends."""

    def __init__(self, state: ReplayState, at: float | None, stuck_after: float) -> None:
        self.state = state
        self.at = state.end if at is None else at
        self.stuck_after = stuck_after
        self._seek = state.seek(self.at)
        self.timeline: Timeline

    def __enter__(self) -> ReplaySource:
        self.timeline = self._seek.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._seek.__exit__(*exc_info)

    @property
    def evaluated_at(self) -> str:
        return format_time(self.at)

    def view(self, pod: Any) -> dict[str, Any]:
        view = pod_view(self.timeline, pod, self.at, self.stuck_after)
        view["deleted_blind"] = None  # a trace records no relists
        view["watch_gaps"] = []
        return view

    def pod(self, namespace: str, name: str, uid: str | None) -> dict[str, Any] | None:
        candidates = [
            self.view(p)
            for p in self.timeline.pods.values()
            if p.namespace == namespace and p.name == name and not p.uid.startswith("name:")
        ]
        chosen = pick(candidates, uid)
        return None if chosen is None else with_others(chosen, candidates)

    def rows(self) -> Iterator[PodRow]:
        for pod in self.timeline.pods.values():
            if not pod.uid.startswith("name:"):
                yield row_from_pod(self.timeline, pod, self.at, self.stuck_after)

    def nodes(self) -> dict[str, dict[str, Any]]:
        return {
            name: {
                "exists": node.exists,
                "ready": node.ready,
                "deleted": format_time(node.deleted) if node.deleted else None,
                "unschedulable": node.unschedulable,
                "taints": node.taints,
                "down": [
                    [format_time(a), format_time(b) if b is not None else None, why]
                    for a, b, why in node.down
                ],
            }
            for name, node in self.timeline.nodes.items()
        }

    def summary(self) -> dict[str, Any]:
        head, _ = self.state.judged_at(self.at, self.stuck_after)
        counts = head["summary"]["verdicts"]
        attention = sum(n for name, n in counts.items() if v.VERDICTS[name].attention)
        return {
            "cluster": head["cluster"],
            "kind": "replay",
            "stream_cursor": None,
            "evaluated_at": head["evaluated_at"],
            "stuck_after": head["stuck_after"],
            "summary": {**head["summary"], "attention": attention},
            "owners": head["owners"],
        }

    def pods(self, filters: PodFilters, offset: int, limit: int) -> dict[str, Any]:
        """The board's pod list at this time: filtered, worst first, one page of it. From
        the judging pass the summary shares (``ReplayState.judged_at``): no durations or
        rows for the pods off the page."""
        _, ranked = self.state.judged_at(self.at, self.stuck_after)
        if filters == NO_FILTERS:  # the board's first look: no test of each pod
            wanted = _named(ranked)
        else:
            binding = self.timeline.binding
            wanted = [
                item
                for item in ranked
                if not item[4].startswith("name:")
                and filters.accepts(
                    item[6].verdict,
                    item[5].namespace,
                    item[5].name,
                    item[5].node,
                    binding(item[5]) if filters.binding else "",
                )
            ]
        page = [item[5] for item in wanted[offset : offset + limit]]
        with paused_gc():  # a collection here would walk the whole trace held in memory
            views = [self.view(pod) for pod in page]
        views.sort(key=sort_key)
        end = offset + len(page)
        return {
            "evaluated_at": self.evaluated_at,
            "total": len(wanted),
            "pods": views,
            "next": str(end) if end < len(wanted) else None,
        }


@dataclass(frozen=True)
class PodFilters:
    """The board's filters (docs/api.md, /api/clusters/C/pods), applied to a trace's pods."""

    verdicts: frozenset[str] = frozenset()  # empty: every verdict
    namespace: str = ""
    node: str | None = None  # "" is "not bound to a node"
    binding: str = ""
    q: str = ""  # case-insensitive substring of namespace/name

    def matches(self, row: PodRow) -> bool:
        return self.accepts(row.verdict, row.namespace, row.name, row.node, row.binding)

    def accepts(
        self, verdict: str, namespace: str, name: str, node: str | None, binding: str | None
    ) -> bool:
        if self.verdicts and verdict not in self.verdicts:
            return False
        if self.namespace and namespace != self.namespace:
            return False
        if self.node is not None and (node or "") != self.node:
            return False
        if self.binding and binding != self.binding:
            return False
        text = self.q.casefold()
        return not text or text in f"{namespace}/{name}".casefold()


NO_FILTERS = PodFilters()


def _named(ranked: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The ranked pods but those known only by name (``name:`` uids, not listed)."""
    if not any(map(_is_placeholder, map(_uid, ranked))):  # C loops: 100,000s of pods
        return ranked
    return [item for item in ranked if not item[4].startswith("name:")]


_uid = itemgetter(4)
_is_placeholder = methodcaller("startswith", "name:")
