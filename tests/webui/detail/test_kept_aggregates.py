"""The nodes and fleet pages of a live cluster are read from what the fold keeps (the
nodes' summary, pods handed per node and verdict, and only the pods on nodes that do not
exist; the fleet's histograms and swimlane further down), never
from every pod; it must equal the same page recomputed from every stored view, exactly
(counts need no sketch). Checked on a scale recording with churn, on the traces with lost
and missing nodes, after retention drops pods, and after a crash restore."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from handoff.core.histogram import RELATIVE_ERROR
from handoff.live import aggregates, clusters, metrics, queries, store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.pages.fleet import fleet_digest, kept_fleet, swimlane_bars
from handoff.live.pages.nodes import kept, nodes_digest
from handoff.live.pages.rows import row_from_view
from handoff.sim import Options, find_scenario, run
from tests.webui.detail.tracedata import TRACES, fold_into_redis


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
    _same_holders(client, cluster)
    return page


def _same_holders(client: redis.Redis, cluster: str) -> None:
    """The pods counted per namespace, and the namespaces and nodes /metrics lists as
    holding pods, are those of every stored view."""
    views = list(queries.all_views(client, cluster))
    per_namespace = Counter(view["namespace"] for view in views)
    kept = client.hgetall(store.namespaces_key(cluster))
    assert {ns.decode(): int(n) for ns, n in kept.items()} == per_namespace
    nodes = sorted({view["node"] for view in views if view["node"]})
    assert metrics.holding(client, cluster) == (sorted(per_namespace), nodes)


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


# ------------------------------------------------------------------- fleet
#
# The fleet page reads the fold's kept histograms and swimlane (``live/aggregates``):
# counts, not-observed counts, the binned histograms and the heatmap's counts equal a
# recomputation from every stored view exactly; percentiles, maxima and the ECDF's x
# within the histograms' stated relative error; the swimlane holds the same pods.


def _fleet_kept(client: redis.Redis, cluster: str, limit: int) -> dict[str, Any]:
    kept = queries.fleet_kept(client, cluster, limit)
    return kept_fleet(kept, lambda nodes: queries.node_histograms(client, cluster, nodes))


def _fleet_recomputed(client: redis.Redis, cluster: str, limit: int) -> dict[str, Any]:
    rows = map(row_from_view, queries.all_views(client, cluster))
    return fleet_digest(rows, queries.fold_nodes(client, cluster)["evaluated_at"], limit)


def _close(kept: float | None, exact: float | None) -> bool:
    if exact is None or exact == 0:
        return kept == exact
    return kept is not None and abs(kept - exact) <= RELATIVE_ERROR * exact + 1e-9


def _lanes(swimlane: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """uid -> (namespace, name, verdict, its bars in absolute ms), whatever the lane order."""
    return {
        uid: (namespace, name, verdict, sorted(bars))
        for (namespace, name, uid, verdict), bars in zip(
            swimlane["lanes"], swimlane_bars(swimlane), strict=True
        )
    }


def _fleet_same(client: redis.Redis, cluster: str, limit: int = 20_000) -> dict[str, Any]:
    kept, full = _fleet_kept(client, cluster, limit), _fleet_recomputed(client, cluster, limit)
    for key in ("evaluated_at", "pods", "verdicts", "slo_seconds"):
        assert kept[key] == full[key], key
    for name, exact in full["durations"].items():
        got = kept["durations"][name]
        assert (got["count"], got["not_observed"]) == (exact["count"], exact["not_observed"])
        assert got["histogram"] == exact["histogram"], name
        for figure in ("p50", "p90", "p99", "max"):
            assert _close(got.get(figure), exact.get(figure)), (name, figure)
        if exact["ecdf"] is not None:
            assert got["ecdf"]["y"] == exact["ecdf"]["y"]
            assert all(map(_close, got["ecdf"]["x"], exact["ecdf"]["x"])), name
    kept_map, full_map = kept["heatmap"], full["heatmap"]
    assert {k: x for k, x in kept_map.items() if k != "p90"} == {
        k: x for k, x in full_map.items() if k != "p90"
    }
    for got_row, exact_row in zip(kept_map["p90"], full_map["p90"], strict=True):
        assert all(map(_close, got_row, exact_row))
    assert kept["swimlane"]["left_out"] == full["swimlane"]["left_out"]
    return kept | {"full": full}


def _created(client: redis.Redis, cluster: str) -> dict[str, str]:
    return {
        view["uid"]: view["milestones"].get("created") or ""
        for view in queries.all_views(client, cluster)
    }


def _same_lanes_up_to_ties(client: redis.Redis, cluster: str, page: dict[str, Any]) -> None:
    """The same newest pods: equal creation times, and the same pods above the oldest
    one shown (pods created at the same instant as it may stand in for one another)."""
    kept, full = _lanes(page["swimlane"]), _lanes(page["full"]["swimlane"])
    created = _created(client, cluster)
    assert sorted(created[u] for u in kept) == sorted(created[u] for u in full)
    if kept:
        oldest = min(created[u] for u in kept)
        above = {u for u in full if created[u] > oldest}
        assert above <= set(kept)
        assert {u: kept[u] for u in above} == {u: full[u] for u in above}


def test_the_fleet_page_of_a_scale_run_equals_its_recomputation(redis_client, scale_trace):
    fold_into_redis(redis_client, "fleet", scale_trace)
    page = _fleet_same(redis_client, "fleet")
    assert _lanes(page["swimlane"]) == _lanes(page["full"]["swimlane"])  # every pod fits
    assert page["pods"] > 600
    assert page["swimlane"]["left_out"] == 0
    figures = page["durations"]["create_to_running"]
    assert figures["count"] > 300
    assert figures["p99"] > figures["p50"] > 0
    assert any(any(x is not None for x in row) for row in page["heatmap"]["p90"])


def test_the_fleet_is_kept_right_through_retention_hand_over_and_crash(redis_client, scale_trace):
    """A lane of 40 (so pods leave it and retention makes it refill), a clean hand-over
    mid-trace (the successor reads the old parts of the pods it moves from their views),
    retention, then a crash after flushes past the last snapshot: the successor resumes
    without rewriting every view, and the kept figures still equal a recomputation."""
    cluster, lane = "fleet-kept", 40
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name=cluster, kind="trace"))
    raw = scale_trace.read_bytes().splitlines()
    lines = [line for line in raw if b'"handoff_trace"' not in line]
    half, tail = len(lines) // 2, len(lines) * 4 // 5
    store.append(redis_client, cluster, lines[:half])
    first = _folder(redis_client, cluster, lane)
    first.snapshot()  # the end of a fold window: right after a flush
    _same_lanes_up_to_ties(redis_client, cluster, _fleet_same(redis_client, cluster, lane))
    store.append(redis_client, cluster, lines[half:tail])
    second = _folder(redis_client, cluster, lane)
    assert second.written
    assert len(second.aggregates.parts) < len(second.written)
    _same_lanes_up_to_ties(redis_client, cluster, _fleet_same(redis_client, cluster, lane))
    second.settings = FoldSettings(block_ms=1, retention_hours=0.0)
    second.retain()
    after = _fleet_same(redis_client, cluster, lane)
    _same_lanes_up_to_ties(redis_client, cluster, after)
    assert len(after["swimlane"]["lanes"]) == lane
    # The newest pods leave the store (as a pod merged into another does): the lane
    # refills from the indexes with the next newest.
    newest = [u.decode() for u in redis_client.zrevrange(aggregates.recent_key(cluster), 0, 9)]
    second.flush(removed=newest)
    refilled = _fleet_same(redis_client, cluster, lane)
    _same_lanes_up_to_ties(redis_client, cluster, refilled)
    assert len(refilled["swimlane"]["lanes"]) == lane
    assert not set(newest) & set(_lanes(refilled["swimlane"]))
    second.snapshot()
    # The rest arrives and is folded and flushed, then the worker dies before its next
    # snapshot: its successor folds from the snapshot and resumes from the stored views.
    store.append(redis_client, cluster, lines[tail:])
    while second.step():
        pass
    second.flush()
    third = _folder(redis_client, cluster, lane)
    assert len(third.aggregates.parts) < len(third.written)  # not counted again
    _same_lanes_up_to_ties(redis_client, cluster, _fleet_same(redis_client, cluster, lane))


def _folder(client: redis.Redis, cluster: str, lane: int) -> Folder:
    folder = Folder(client, cluster, FoldSettings(block_ms=1))
    folder.aggregates.lane_cap = lane
    folder.restore()
    while folder.step():
        pass
    folder.flush()
    return folder


def test_a_store_written_without_the_fleet_keys_is_counted_again(redis_client):
    """A clean hand-over from a version that kept neither the fleet's aggregates nor the
    name index: the successor rewrites every pod, as after a crash, and both are whole."""
    cluster = "upgraded"
    first = fold_into_redis(redis_client, cluster, TRACES / "recreated-same-name.jsonl")
    first.snapshot()
    for key in first.aggregates.keys() + first.search.keys():
        redis_client.delete(key)
    successor = Folder(redis_client, cluster, FoldSettings(block_ms=1))
    successor.restore()
    assert len(successor.aggregates.parts) == len(successor.written) > 0
    _fleet_same(redis_client, cluster)
    view = next(queries.all_views(redis_client, cluster))
    assert queries.pod(redis_client, cluster, view["namespace"], view["name"], None) is not None


def test_a_store_written_without_the_namespaces_counts_is_counted_again(redis_client):
    """From a version before the namespaces' counts (/metrics scanned for them): the
    successor rewrites every pod and the counts are whole."""
    cluster = "upgraded-ns"
    first = fold_into_redis(redis_client, cluster, TRACES / "recreated-same-name.jsonl")
    first.snapshot()
    redis_client.delete(store.namespaces_key(cluster))
    successor = Folder(redis_client, cluster, FoldSettings(block_ms=1))
    successor.restore()
    assert len(successor.written) > 0
    _same_holders(redis_client, cluster)
