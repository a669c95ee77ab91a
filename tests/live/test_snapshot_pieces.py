"""A snapshot is stored as a list of pieces (never a string grown by APPENDs, which Redis
copies as it grows), and a store written the old way, one string, still restores."""

from __future__ import annotations

import os

import msgspec

from handoff.live import store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.snapshots import Snapshot
from handoff.live.sources.playback import replay

from .test_fold_pauses import TRACES


def test_a_snapshot_of_many_pieces_comes_back_whole(redis_client):
    blob = os.urandom(3 * store.SNAPSHOT_PIECE + 12_345)
    assert store.save_snapshot(redis_client, "c", blob, "1-0")
    key = store.snapshot_key("c")
    assert redis_client.type(key) == b"list"
    assert redis_client.llen(key) == 4
    assert store.load_snapshot(redis_client, "c") == blob
    assert not redis_client.keys(f"{key}:saving:*")  # the scratch key became the snapshot


def test_an_older_snapshot_is_refused_and_its_scratch_goes(redis_client):
    assert store.save_snapshot(redis_client, "c", b"new", "5-0")
    assert not store.save_snapshot(redis_client, "c", b"old", "4-0")
    assert store.load_snapshot(redis_client, "c") == b"new"
    assert not redis_client.keys(f"{store.snapshot_key('c')}:saving:*")


def test_no_snapshot_is_none(redis_client):
    assert store.load_snapshot(redis_client, "c") is None


def test_a_store_with_the_old_one_string_snapshot_restores_from_it(redis_client):
    """A store saved before snapshots were lists (one string): the successor reads it,
    folds only what came after it, and its next save writes the list."""
    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    first = Folder(redis_client, "c", FoldSettings(block_ms=1))
    while first.step():
        pass
    first.snapshot()
    blob = store.load_snapshot(redis_client, "c")
    assert blob is not None
    redis_client.delete(store.snapshot_key("c"))
    redis_client.set(store.snapshot_key("c"), blob)  # as the old code stored it
    successor = Folder(redis_client, "c", FoldSettings(block_ms=1))
    saved = successor._load_snapshot()
    assert saved is not None
    assert saved.cursor == msgspec.msgpack.decode(blob, type=Snapshot).cursor
    assert sorted(successor.timeline.pods) == sorted(first.timeline.pods)
    successor.snapshot()
    assert redis_client.type(store.snapshot_key("c")) == b"list"
