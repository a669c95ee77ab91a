"""The nodes page's data: each node's state and readiness history, the pods handed to
it by verdict, and the pods whose nodeName names no node.

A live cluster's come from what the fold keeps (``kept``: the nodes' summary with their
readiness history, the pods handed per node and verdict) and the views of the pods on
nodes that do not exist; a replay folds them from the trace's pods (``nodes_digest``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from handoff.core import verdicts as v
from handoff.live.pages.rows import PodRow

MISSING_LISTED = 500


class Nodes:
    """The nodes page's per-node counts, fed one pod at a time (see ``fleet.Fleet``)."""

    def __init__(self) -> None:
        self.handed: dict[str, Counter[str]] = {}
        self.missing: dict[str, list[PodRow]] = {}

    def add(self, row: PodRow) -> None:
        if not row.node:
            return
        counts = self.handed.get(row.node)
        if counts is None:
            counts = self.handed[row.node] = Counter()
        counts[row.verdict] += 1
        if row.node_exists is False:
            self.missing.setdefault(row.node, []).append(row)

    def result(self, nodes: dict[str, dict[str, Any]], evaluated_at: str | None) -> dict[str, Any]:
        """``nodes``: name -> {exists, ready, deleted, unschedulable, taints, down}."""
        table = []
        for name in sorted(set(nodes) | set(self.handed)):
            state = nodes.get(name) or {}
            counts = self.handed.get(name, Counter())
            table.append(
                {
                    "name": name,
                    "known": name in nodes,
                    "exists": bool(state.get("exists")),
                    "ready": state.get("ready") or "",
                    "deleted": state.get("deleted"),
                    "unschedulable": bool(state.get("unschedulable")),
                    "taints": state.get("taints") or [],
                    "down": [
                        {"from": start, "to": end, "why": why}
                        for start, end, why in state.get("down") or []
                    ],
                    "pods": sum(counts.values()),
                    "verdicts": {x: counts[x] for x in v.VERDICT_NAMES if counts[x]},
                }
            )
        return {"evaluated_at": evaluated_at, "nodes": table, "missing": _missing(self.missing)}


def kept(
    handed: dict[str, dict[str, int]],
    nodes: dict[str, dict[str, Any]],
    on_missing: Callable[[list[str]], Iterable[PodRow]],
    evaluated_at: str | None,
) -> dict[str, Any]:
    """The page from the fold's aggregates: ``handed`` (node -> verdict -> pods) and
    ``nodes`` (the fold's summary); ``on_missing(names)`` gives the pods on those nodes
    whose view says the node does not exist (only nodes the summary does not show as
    existing can have them)."""
    acc = Nodes()
    acc.handed = {node: Counter(counts) for node, counts in handed.items()}
    gone = sorted(n for n in handed if not (nodes.get(n) or {}).get("exists"))
    for row in on_missing(gone):
        acc.missing.setdefault(row.node or "", []).append(row)
    return acc.result(nodes, evaluated_at)


def nodes_digest(
    rows: Iterable[PodRow], nodes: dict[str, dict[str, Any]], evaluated_at: str | None
) -> dict[str, Any]:
    acc = Nodes()
    for row in rows:
        acc.add(row)
    return acc.result(nodes, evaluated_at)


def _missing(missing: dict[str, list[PodRow]]) -> list[dict[str, Any]]:
    """Per missing node name, its pods worst first."""
    out = []
    for node in sorted(missing, key=lambda n: (-len(missing[n]), n)):
        pods = sorted(missing[node], key=lambda r: (-v.severity(r.verdict), r.created, r.name))
        out.append(
            {
                "node": node,
                "count": len(pods),
                "pods": [
                    {
                        "namespace": r.namespace,
                        "name": r.name,
                        "uid": r.uid,
                        "verdict": r.verdict,
                        "reason": r.reason,
                        "binding": r.binding,
                        "created": r.created or None,
                        "podgc": r.podgc,
                    }
                    for r in pods[:MISSING_LISTED]
                ],
            }
        )
    return out
