"""The nodes page of a live cluster is read from what the fold keeps (the nodes' summary,
pods handed per node and verdict, and only the pods on nodes that do not exist), never
from every pod; it must equal the same page recomputed from every stored view, exactly
(counts need no sketch). Checked on a scale recording with churn, on the traces with lost
and missing nodes, after retention drops pods, and after a crash restore."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis

from handoff.live import queries, store
from handoff.live.fold import Folder, FoldSettings
from handoff.sim import Options, find_scenario, run
from tests.webui.detail.tracedata import TRACES, fold_into_redis
from webui.detail.nodes import kept, nodes_digest
from webui.detail.rows import row_from_view


def _kept(client: redis.Redis, cluster: str) -> dict[str, Any]:
    fold = queries.fold_nodes(client, cluster)

    def on_missing(names: list[str]):
        return map(row_from_view, queries.on_missing_nodes(client, cluster, names))

    return kept(queries.handed(client, cluster), fold["nodes"], on_missing, fold["evaluated_at"])


def _recomputed(client: redis.Redis, cluster: str) -> dict[str, Any]:
    fold = queries.fold_nodes(client, cluster)
    rows = map(row_from_view, queries.all_views(client, cluster))
    return nodes_digest(rows, fold["nodes"], fold["evaluated_at"])


def _same(client: redis.Redis, cluster: str) -> dict[str, Any]:
    page = _kept(client, cluster)
    assert page == _recomputed(client, cluster)
    return page


@pytest.fixture(scope="module")
def scale_trace(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("scale") / "scale.jsonl"
    options = Options(seed=7, nodes=40, pods=600, churn=15.0, duration=90)
    run(find_scenario("scale", None), options, record=path)
    return path


def test_the_nodes_page_of_a_scale_run_equals_its_recomputation(redis_client, scale_trace):
    fold_into_redis(redis_client, "scale", scale_trace)
    page = _same(redis_client, "scale")
    assert len(page["nodes"]) >= 40
    assert sum(row["pods"] for row in page["nodes"]) > 600
    assert len({v for row in page["nodes"] for v in row["verdicts"]}) >= 2


@pytest.mark.parametrize(
    "trace",
    ["node-lost", "stuck-node-missing", "deployment-nodename", "recreated-same-name", "deleted"],
)
def test_pods_on_missing_nodes_are_found_without_reading_every_pod(redis_client, trace):
    cluster = f"t-{trace}"
    fold_into_redis(redis_client, cluster, TRACES / f"{trace}.jsonl")
    _same(redis_client, cluster)


def test_retention_and_a_crash_restore_keep_the_counts_right(redis_client, scale_trace):
    folder = fold_into_redis(redis_client, "kept", scale_trace)
    before = _same(redis_client, "kept")
    # Retention: every deleted pod goes (the drop script takes it off the counts).
    folder.settings = FoldSettings(block_ms=1, retention_hours=0.0)
    folder.retain()
    after = _same(redis_client, "kept")
    assert sum(r["pods"] for r in after["nodes"]) < sum(r["pods"] for r in before["nodes"])
    # A successor without a usable snapshot clears the indexes and rewrites every view.
    redis_client.hset(store.fold_key("kept"), "cursor", "1-0")
    successor = Folder(redis_client, "kept", FoldSettings(block_ms=1))
    successor.restore()
    successor.flush()
    restored = _same(redis_client, "kept")
    assert sum(r["pods"] for r in restored["nodes"]) >= sum(r["pods"] for r in after["nodes"])
