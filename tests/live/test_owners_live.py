"""Owners in the live store: the fold writes one record per owner needing attention
(``store.owners_key``), the read side judges staleness and activity on the cluster's clock."""

from __future__ import annotations

from handoff.live import queries, store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.sources.playback import replay
from tests.core.ownershapes import write_trace

from .helpers import fold_all


def _owners(redis_client, tmp_path, cluster="owners"):
    replay(redis_client, cluster, write_trace(tmp_path / "owners.jsonl", cluster))
    return fold_all(redis_client, cluster)


def test_the_fold_stores_failing_owners_and_loops_sized_by_owners(redis_client, tmp_path):
    _owners(redis_client, tmp_path)

    found = queries.owners(redis_client, "owners")

    assert [f["key"] for f in found["failing"]] == [
        "StatefulSet/default/db",
        "ReplicaSet/default/quota-7c9",
    ]
    assert [f["cause"] for f in found["failing"]] == ["pod-security", "quota"]
    (loop,) = found["loops"]
    assert loop["owner"] == {"kind": "Deployment", "namespace": "default", "name": "web"}
    assert (loop["verdict"], loop["count"], loop["per_hour"]) == ("podgc-deleted", 5, 60.0)
    # One field per owner that needs attention: the loop's owner and the two failing ones,
    # not the pods (six of them) nor the healthy ReplicaSet.
    assert redis_client.hlen(store.owners_key("owners")) == 3


def test_a_successor_that_refolds_the_stream_writes_the_same_records(redis_client, tmp_path):
    _owners(redis_client, tmp_path)
    before = sorted(store.owner_records(redis_client, "owners"))
    redis_client.hset(store.owners_key("owners"), "ReplicaSet/default/gone", b"{}")
    redis_client.delete(store.snapshot_key("owners"))
    folder = Folder(redis_client, "owners", FoldSettings(block_ms=1))
    folder.restore()  # no snapshot: the whole stream again, every record rewritten

    assert sorted(store.owner_records(redis_client, "owners")) == before


def test_a_snapshot_restore_keeps_the_owners(redis_client, tmp_path):
    folder = _owners(redis_client, tmp_path)
    folder.snapshot()
    successor = Folder(redis_client, "owners", FoldSettings(block_ms=1))
    successor.restore()

    assert successor.timeline.owners.loops(successor.now())[0]["count"] == 5
    assert len(queries.owners(redis_client, "owners")["failing"]) == 2


def test_staleness_and_activity_are_judged_on_the_cluster_clock(redis_client, tmp_path):
    _owners(redis_client, tmp_path)
    flushed = float(store.fold_state(redis_client, "owners")["flushed"])

    later = queries.owners(redis_client, "owners", now=flushed + 2 * 3600)

    assert later["loops"] == []
    assert all(f["stale"] for f in later["failing"])
    assert all("cannot tell" in f["explanation"] for f in later["failing"])


def test_retention_forgets_old_owners_and_their_records(redis_client, tmp_path):
    folder = _owners(redis_client, tmp_path)
    folder.clock = lambda: folder.applied_at + 25 * 3600  # a day and an hour later
    folder.retain()
    folder.flush()

    assert redis_client.hlen(store.owners_key("owners")) == 0
    assert folder.timeline.owners.failures == {}
