"""A live cluster's fleet and nodes answers, encoded, from what the fold keeps in its
store: what every web process sends (``answers.shared``), built by the answer builder
(``builder``) or, with none running, by a web process itself.

They are kept and sent gzip-compressed (``packed``): at 5,000 nodes the nodes answer is
881 KB of JSON and 53 KB packed, the fleet's 10,000-pod swimlane 2.0 MB and 0.79 MB, for
4 ms and 25 ms once per build instead of per viewer (docs/benchmarks.md). Level 1: level
6 packs the fleet 10 % smaller for five times the CPU."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
import redis

from handoff.live import queries
from handoff.live.pages.fleet import SWIMLANE_LIMIT, kept_fleet
from handoff.live.pages.nodes import kept
from handoff.live.pages.rows import row_from_view

NODES = "nodes"
# A shared answer's name changes with its shape, so no version is handed a shape it does
# not read from a store it shares with another (the fleet's bars per lane: 2026-12-04).
FLEET = "fleet.2"
# As the web encodes every JSON answer (webui/jsonbody.py), for types JSON knows.
OPTIONS = orjson.OPT_NON_STR_KEYS
PACK_LEVEL = 1


def fleet_kind(lanes: int) -> str:
    """The shared answer's name for a fleet with ``lanes`` swimlane lanes."""
    return f"{FLEET}:{lanes}"


def fleet(client: redis.Redis, cluster: str, lanes: int = SWIMLANE_LIMIT) -> dict[str, Any]:
    return kept_fleet(
        queries.fleet_kept(client, cluster, lanes),
        lambda nodes: queries.node_histograms(client, cluster, nodes),
    )


def nodes(client: redis.Redis, cluster: str) -> dict[str, Any]:
    folded = queries.fold_nodes(client, cluster)

    def on_missing(names: list[str]) -> Any:
        return (row_from_view(view) for view in queries.on_missing_nodes(client, cluster, names))

    return kept(
        queries.handed(client, cluster), folded["nodes"], on_missing, folded["evaluated_at"]
    )


def known(kind: str) -> bool:
    """Whether ``kind`` names an answer ``encoded`` builds."""
    name, _, lanes = kind.partition(":")
    return kind == NODES or (name == FLEET and lanes.isdigit())


def encoded(client: redis.Redis, cluster: str, kind: str) -> bytes:
    """The answer named ``kind`` (``NODES`` or ``fleet_kind(lanes)``) as JSON bytes."""
    if kind == NODES:
        return orjson.dumps(nodes(client, cluster), option=OPTIONS)
    name, _, lanes = kind.partition(":")
    if name == FLEET and lanes.isdigit():
        return orjson.dumps(fleet(client, cluster, int(lanes)), option=OPTIONS)
    raise ValueError(f"no shared answer {kind!r}")


def packed(client: redis.Redis, cluster: str, kind: str) -> bytes:
    """``encoded``, gzip-compressed as it is kept and sent (no timestamp in the header:
    the same answer packs to the same bytes)."""
    return gzip.compress(encoded(client, cluster, kind), compresslevel=PACK_LEVEL, mtime=0)
