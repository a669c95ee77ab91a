"""Prometheus text exposition format 0.0.4: families rendered from plain numbers, and the
per-pod contributions to the counters the metrics aggregation adds up.

A pod contributes one observation per known handoff duration to the histograms of its
namespace and (for the node-side durations) of its node, and one count to the incident
counters of its namespace and node once it is judged podgc-deleted, rejected or evicted.
Its contribution is kept encoded (``encode_contribution``) so a later view of the same pod
can replace it exactly. The counters only grow, as Prometheus counters must for ``rate()``:
a pod forgotten by the retention stays counted (``removed``), and an incident a pod once
had stays counted when its verdict moves on (``replaced``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from handoff.core import verdicts as v

# Around the pod startup SLO (5 s, p99): fine below it, coarse above.
BUCKETS: tuple[float, ...] = (
    0.5,
    1.0,
    2.0,
    3.0,
    4.0,
    5.0,
    6.0,
    8.0,
    10.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
# Per namespace: every duration. Per node only those the node is responsible for: with
# 5,000 nodes, a series per node, duration and bucket must stay few.
NAMESPACE_DURATIONS: tuple[str, ...] = (
    "create_to_bind",
    "bind_to_ack",
    "ack_to_running",
    "bind_to_running",
    "create_to_running",
)
NODE_DURATIONS: tuple[str, ...] = ("bind_to_ack", "bind_to_running")
# Verdicts counted as incidents: ends a pod does not come back from, so a count of pods
# that reached them is a counter. Per namespace and per node: no series per pod.
INCIDENT_VERDICTS: tuple[str, ...] = (v.PODGC_DELETED, v.REJECTED, v.EVICTED)
SEPARATOR = "\x1f"  # between the fields of a counter key; never in a Kubernetes name
# Keys: histograms ``scope|label|duration|bucket`` (scope ns or node, bucket an index or
# "sum"); incidents ``incidents-<scope>|label|verdict`` (three fields).
INCIDENTS = "incidents-"


@dataclass
class Family:
    name: str
    kind: str  # gauge | counter | histogram
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> None:
        self.samples.append((self.name + suffix, labels, value))


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def render(families: Iterable[Family]) -> str:
    out: list[str] = []
    for family in families:
        out.append(f"# HELP {family.name} {escape_help(family.help)}")
        out.append(f"# TYPE {family.name} {family.kind}")
        for name, labels, value in family.samples:
            if labels:
                body = ",".join(f'{key}="{escape_label(str(val))}"' for key, val in labels.items())
                out.append(f"{name}{{{body}}} {format_value(value)}")
            else:
                out.append(f"{name} {format_value(value)}")
    return "\n".join(out) + "\n"


def bucket_index(seconds: float) -> int:
    """Index of the first bucket whose upper bound holds ``seconds`` (len(BUCKETS): +Inf)."""
    return bisect_left(BUCKETS, seconds)


def contribution(view: Mapping[str, Any]) -> dict[str, float]:
    """The counter increments one pod view stands for: ``scope|label|duration|bucket`` and
    ``...|sum`` keys (scope ``ns`` or ``node``) → amount, and its incident, if any."""
    counts: dict[str, float] = {}
    durations = view.get("durations") or {}
    namespace = view.get("namespace") or ""
    node = view.get("node") or ""
    if view.get("verdict") in INCIDENT_VERDICTS:
        counts[SEPARATOR.join((INCIDENTS + "ns", namespace, view["verdict"]))] = 1.0
        if node:
            counts[SEPARATOR.join((INCIDENTS + "node", node, view["verdict"]))] = 1.0
    for name in NAMESPACE_DURATIONS:
        value = durations.get(name)
        if value is None:
            continue
        scopes = [("ns", namespace)]
        if node and name in NODE_DURATIONS:
            scopes.append(("node", node))
        for scope, label in scopes:
            prefix = SEPARATOR.join((scope, label, name))
            bucket = f"{prefix}{SEPARATOR}{bucket_index(value)}"
            counts[bucket] = counts.get(bucket, 0) + 1
            total = f"{prefix}{SEPARATOR}sum"
            counts[total] = counts.get(total, 0) + float(value)
    return counts


def encode_contribution(counts: Mapping[str, float]) -> str:
    return "\n".join(f"{key}\t{value!r}" for key, value in sorted(counts.items()))


def decode_contribution(text: str) -> dict[str, float]:
    counts: dict[str, float] = {}
    for line in text.splitlines():
        key, _, value = line.rpartition("\t")
        if key:
            counts[key] = float(value)
    return counts


def replaced(old: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """A pod's next contribution: ``new``, keeping the incidents it had (a counted incident
    is never taken back, whatever the pod's later verdict)."""
    kept = {key: value for key, value in old.items() if key.startswith(INCIDENTS)}
    return {**kept, **new}


def delta(old: Mapping[str, float], new: Mapping[str, float]) -> dict[str, float]:
    """What to add to the counters when a pod's contribution goes from ``old`` to ``new``."""
    change = {key: value - old.get(key, 0.0) for key, value in new.items()}
    for key, value in old.items():
        if key not in new:
            change[key] = -value
    return {key: value for key, value in change.items() if value != 0}


def histogram_families(cluster: str, counters: Mapping[str, float]) -> tuple[Family, Family]:
    """Two histogram families (per namespace, per node) from the aggregated counters."""
    per_ns = Family(
        "handoff_pod_duration_seconds",
        "histogram",
        "Handoff durations of the pods of a namespace (create, bind, kubelet ack, running).",
    )
    per_node = Family(
        "handoff_node_pod_duration_seconds",
        "histogram",
        "Node-side handoff durations (bind to kubelet ack, bind to running) per node.",
    )
    series: dict[tuple[str, str, str], dict[str, float]] = {}
    for key, value in counters.items():
        parts = key.split(SEPARATOR)
        if len(parts) != 4:  # an incident key
            continue
        scope, label, duration, slot = parts
        series.setdefault((scope, label, duration), {})[slot] = value
    for (scope, label, duration), slots in sorted(series.items()):
        family, label_name = (per_ns, "namespace") if scope == "ns" else (per_node, "node")
        labels = {"cluster": cluster, label_name: label, "duration": duration}
        running = 0.0
        for index, bound in enumerate(BUCKETS):
            running += slots.get(str(index), 0.0)
            family.add(running, "_bucket", **labels, le=format_value(bound))
        running += slots.get(str(len(BUCKETS)), 0.0)
        family.add(running, "_bucket", **labels, le="+Inf")
        family.add(round(slots.get("sum", 0.0), 6), "_sum", **labels)
        family.add(running, "_count", **labels)
    return per_ns, per_node


def incident_families(
    cluster: str,
    counters: Mapping[str, float],
    namespaces: Iterable[str] = (),
    nodes: Iterable[str] = (),
) -> tuple[Family, Family]:
    """Two counter families (per namespace, per node) of the pods that reached an incident
    verdict, from the aggregated counters. ``namespaces`` and ``nodes`` (those holding pods
    now) get a 0 for each incident they have not had: ``increase()`` takes a series' first
    sample as its start, so a series born at 1 would hide its first incident."""
    per_ns = Family(
        "handoff_pod_incidents_total",
        "counter",
        "Pods judged podgc-deleted, rejected or evicted, per namespace (counted once each).",
    )
    per_node = Family(
        "handoff_node_pod_incidents_total",
        "counter",
        "Pods judged podgc-deleted, rejected or evicted, per node they were bound to.",
    )
    counted = dict.fromkeys(
        (
            SEPARATOR.join((INCIDENTS + scope, label, verdict))
            for scope, labels in (("ns", namespaces), ("node", nodes))
            for label in labels
            for verdict in INCIDENT_VERDICTS
        ),
        0.0,
    )
    counted.update((key, value) for key, value in counters.items() if key.startswith(INCIDENTS))
    for key, value in sorted(counted.items()):
        parts = key.split(SEPARATOR)
        if len(parts) != 3:
            continue
        scope, label, verdict = parts
        per_namespace = scope == INCIDENTS + "ns"
        family, label_name = (per_ns, "namespace") if per_namespace else (per_node, "node")
        family.add(value, cluster=cluster, **{label_name: label}, verdict=verdict)
    return per_ns, per_node
