"""What keeps the fold worker's live path free of long pauses: the periodic snapshot is
written by a forked copy, a late snapshot never replaces a newer one, the sweep and
retention look only at the pods they may change, and the collector is kept off the
state between flushes."""

from __future__ import annotations

import gc
import itertools
import os
import time
from pathlib import Path

import msgspec
import orjson
import pytest

from handoff.core.gcpause import Tenure
from handoff.core.podstate import DELETED
from handoff.core.trace import TraceReader
from handoff.live import queries, store
from handoff.live.fold import TIME_BASED, Folder, FoldSettings
from handoff.live.snapshots import Snapshot
from handoff.live.sources.playback import replay
from handoff.offline.triage import fold_file
from handoff.sim import Options, find_scenario, run

from .helpers import fold_all

TRACES = Path(__file__).parent.parent / "data" / "traces"


def _stored_snapshot(client, cluster: str) -> tuple[str, bytes]:
    return store.fold_state(client, cluster)["snapshot"], store.load_snapshot(client, cluster)


def test_the_periodic_snapshot_is_written_by_a_copy_and_then_trims(redis_client):
    trace = TRACES / "node-lost.jsonl"
    replay(redis_client, "c", trace)
    folder = Folder(redis_client, "c", FoldSettings(block_ms=1, snapshot_interval=0))
    while folder.step():
        pass
    assert folder.saver is not None  # a copy is writing it; the fold went on
    pid = folder.saver[0]
    deadline = time.monotonic() + 30
    while folder.saver is not None and time.monotonic() < deadline:
        folder._reap(wait=False)
        time.sleep(0.01)
    assert folder.saver is None, "the background snapshot did not finish"
    cursor, blob = _stored_snapshot(redis_client, "c")
    assert cursor == folder.cursor
    # What the copy wrote is what the foreground would have written, but for the views
    # written since: the copy names them as pending, changed and not yet flushed.
    redis_client.delete(store.snapshot_key("c"), store.fold_key("c"))
    folder.snapshot()
    again, foreground = _stored_snapshot(redis_client, "c")
    background = msgspec.msgpack.decode(blob, type=Snapshot)
    assert again == cursor
    assert background.written is not None
    assert set(background.written) | set(background.pending) == set(folder.written)
    assert msgspec.structs.replace(background, written=folder.written, pending=[]) == (
        msgspec.msgpack.decode(foreground, type=Snapshot)
    )
    with pytest.raises(ProcessLookupError):  # reaped: no zombie left behind
        os.kill(pid, 0)


def _reaped(folder: Folder) -> None:
    deadline = time.monotonic() + 30
    while folder.saver is not None and time.monotonic() < deadline:
        folder._reap(wait=False)
        time.sleep(0.01)
    assert folder.saver is None, "the background snapshot did not finish"


def test_a_busy_cluster_snapshots_by_events_folded_not_only_by_the_interval(redis_client):
    """What a successor refolds after a crash is bounded by entries: a snapshot is due
    after ``snapshot_events`` entries however little time passed."""
    trace = TRACES / "node-lost.jsonl"
    replay(redis_client, "c", trace)
    every = redis_client.xlen(store.events_key("c")) // 3
    settings = FoldSettings(block_ms=1, batch=5, snapshot_interval=1e9, snapshot_events=every)
    folder = Folder(redis_client, "c", settings)
    started = [0]  # entries folded when each snapshot was started
    while folder.step():
        if folder.saver is not None:
            started.append(folder.events)
            cursor = folder.saver[1]
            _reaped(folder)
            assert store.fold_state(redis_client, "c")["snapshot"] == cursor
    gaps = [after - before for before, after in itertools.pairwise(started)]
    assert len(gaps) >= 2, "a snapshot every third of the trace"
    assert all(every <= gap < every + settings.batch for gap in gaps)
    replay(redis_client, "quiet", trace)
    quiet = Folder(redis_client, "quiet", FoldSettings(block_ms=1, snapshot_interval=1e9))
    while quiet.step():
        assert quiet.saver is None  # fewer entries than snapshot_events, and no time


def test_a_successor_restores_what_the_background_copy_saved(redis_client):
    trace = TRACES / "evicted-noexecute.jsonl"
    replay(redis_client, "c", trace)
    first = Folder(redis_client, "c", FoldSettings(block_ms=1, snapshot_interval=0))
    while first.step():
        pass
    first.close()  # waits for the copy
    second = Folder(redis_client, "c", FoldSettings(block_ms=1))
    second.load()
    assert second.events == 0  # the snapshot covered the whole stream
    assert set(second.timeline.pods) == set(first.timeline.pods)


def test_a_late_snapshot_never_replaces_a_newer_one(redis_client):
    assert store.save_snapshot(redis_client, "c", b"newer", "1700000000000-5")
    assert not store.save_snapshot(redis_client, "c", b"older", "1700000000000-4")
    assert not store.save_snapshot(redis_client, "c", b"older", "999-9")
    assert _stored_snapshot(redis_client, "c") == ("1700000000000-5", b"newer")
    assert store.save_snapshot(redis_client, "c", b"same", "1700000000000-5")
    assert store.save_snapshot(redis_client, "c", b"later", "1700000000001-0")
    assert _stored_snapshot(redis_client, "c") == ("1700000000001-0", b"later")


def test_the_sweep_looks_only_at_pods_whose_verdict_time_can_change(redis_client):
    replay(redis_client, "c", TRACES / "awaiting-kubelet.jsonl")
    folder = fold_all(redis_client, "c")
    waiting = {uid for uid, (verdict, _, _) in folder.written.items() if verdict in TIME_BASED}
    assert len(waiting) == 1
    assert folder.timed == waiting
    # Time passes with no event: the sweep judges it stuck and forgets it.
    folder.timeline.last_observed += folder.settings.stuck_after + 1
    folder.sweep()
    (uid,) = waiting
    assert folder.written[uid][0] == "stuck"
    assert queries.pod_views(redis_client, "c")[uid]["verdict"] == "stuck"
    assert folder.timed == set()


def test_retention_forgets_deleted_pods_oldest_first_without_walking_every_pod(redis_client):
    trace = TRACES / "evicted-noexecute.jsonl"
    replay(redis_client, "c", trace)
    folder = fold_all(redis_client, "c")
    deleted = {
        uid for uid, pod in folder.timeline.pods.items() if pod.milestones[DELETED] is not None
    }
    assert deleted, "the trace deletes pods"
    assert {uid for _, uid in folder.deletions} == deleted
    # Move the cluster's clock past the retention: every deleted pod goes, nothing else.
    folder.timeline.last_observed += folder.settings.retention_hours * 3600 + 60
    folder.retain()
    assert not deleted & set(folder.timeline.pods)
    assert not deleted & set(queries.pod_views(redis_client, "c"))
    assert folder.deletions == []


def test_tenure_freezes_survivors_and_gives_them_back():
    tenure = Tenure(interval=0)
    before = gc.get_freeze_count()
    kept = [[i] for i in range(1000)]  # noqa: F841 - survivors to freeze
    tenure.settle()
    assert gc.get_freeze_count() >= before + 1000
    tenure.release()
    assert gc.get_freeze_count() == 0


def test_a_large_dict_of_short_tuples_stays_frozen_as_it_grows():
    """The fold's per-pod dicts of tuples (``Folder.written``) grow by a few entries a
    flush. A settle freezes them; one that un-tracked them instead would have the next
    tuple stored track them again as young objects, walked whole by every generation's
    next collection."""
    tenure = Tenure(interval=0)
    written = {f"uid-{i}": (f"verdict-{i % 7}", "ns", f"node-{i % 50}") for i in range(5000)}
    for flush in range(3):
        tenure.settle()
        written[f"new-{flush}"] = (f"verdict-{flush}", "ns", "node-1")
        assert gc.is_tracked(written)
        assert not any(obj is written for obj in gc.get_objects()), "young again"
    tenure.release()
    assert gc.get_freeze_count() == 0


def test_a_restored_state_is_frozen_uncollected_until_the_window_ends(redis_client):
    """The successor decodes and folds with the collector paused; what it built is then
    frozen, not walked by a first collection in the live path, and given back at close."""
    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    fold_all(redis_client, "c").snapshot()
    gc.collect()
    folder = Folder(redis_client, "c", FoldSettings(block_ms=1, gc_settle_interval=60.0))
    collections = gc.get_stats()[0]["collections"]
    folder.restore()
    assert gc.isenabled()
    assert gc.get_stats()[0]["collections"] == collections  # none while restoring
    assert gc.get_freeze_count() >= len(folder.timeline.pods)
    folder.close()
    assert gc.get_freeze_count() == 0


def _indexes(client, cluster: str) -> dict[bytes, list[bytes]]:
    keys = client.scan_iter(match=store.index_key(cluster, "*", "*"), count=1000, _type="zset")
    return {key: client.zrange(key, 0, -1) for key in sorted(keys)}


def _written_counts(monkeypatch) -> list[int]:
    counts: list[int] = []
    real = store.write_pods

    def counting(pipe, cluster, views, previous):
        counts.append(len(views))
        return real(pipe, cluster, views, previous)

    monkeypatch.setattr(store, "write_pods", counting)
    return counts


def test_after_a_clean_hand_over_only_the_tail_is_written(redis_client, monkeypatch):
    head = [event.raw for event in TraceReader(TRACES / "node-lost.jsonl")]
    tail = [event.raw for event in TraceReader(TRACES / "scheduled-running.jsonl")]
    store.append(redis_client, "c", head)
    first = fold_all(redis_client, "c")
    first.snapshot()  # the end of a fold window: right after a flush
    store.append(redis_client, "c", tail)
    counts = _written_counts(monkeypatch)
    Folder(redis_client, "c", FoldSettings(block_ms=1)).restore()
    store.append(redis_client, "alone", tail)
    tail_pods = len(fold_all(redis_client, "alone").written)
    assert sum(counts[:1]) == tail_pods  # the tail's pods, not every pod again
    # The same views and index entries as folding it all from scratch gives.
    store.append(redis_client, "full", head + tail)
    fold_all(redis_client, "full")
    mine, full = queries.pod_views(redis_client, "c"), queries.pod_views(redis_client, "full")
    assert len(mine) == len(first.written) + tail_pods
    assert {uid: (v["verdict"], v["reason"], v["milestones"]) for uid, v in mine.items()} == {
        uid: (v["verdict"], v["reason"], v["milestones"]) for uid, v in full.items()
    }
    assert [k.split(b":", 2)[2] for k in _indexes(redis_client, "c")] == [
        k.split(b":", 2)[2] for k in _indexes(redis_client, "full")
    ]
    assert list(_indexes(redis_client, "c").values()) == list(
        _indexes(redis_client, "full").values()
    )


def _same_store(client, mine: str, full: str) -> None:
    """The views, index entries and per-node counts of ``mine`` are ``full``'s."""
    views, expected = queries.pod_views(client, mine), queries.pod_views(client, full)
    assert {uid: (v["verdict"], v["reason"], v["milestones"]) for uid, v in views.items()} == {
        uid: (v["verdict"], v["reason"], v["milestones"]) for uid, v in expected.items()
    }
    indexes, others = _indexes(client, mine), _indexes(client, full)
    assert [k.split(b":", 2)[2] for k in indexes] == [k.split(b":", 2)[2] for k in others]
    assert list(indexes.values()) == list(others.values())
    handed = client.hgetall(store.node_verdicts_key(mine))
    assert handed == client.hgetall(store.node_verdicts_key(full))
    namespaces = client.hgetall(store.namespaces_key(mine))
    assert namespaces == client.hgetall(store.namespaces_key(full))


def test_a_store_that_is_not_the_folds_gets_every_view_rewritten(redis_client, monkeypatch):
    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    first = fold_all(redis_client, "c")
    first.snapshot()
    # Someone removed a view behind the fold's back: the store no longer matches.
    uid = next(iter(first.written))
    redis_client.hdel(store.pods_key("c"), uid)
    counts = _written_counts(monkeypatch)
    Folder(redis_client, "c", FoldSettings(block_ms=1)).restore()
    assert sum(counts) == len(first.written)
    assert uid in queries.pod_views(redis_client, "c")


def test_pods_pending_at_the_snapshot_are_written_again(redis_client, monkeypatch):
    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    first = fold_all(redis_client, "c")
    uid = next(iter(first.written))
    first.dirty.add(uid)  # changed, not flushed yet when the snapshot was taken
    first.snapshot()
    counts = _written_counts(monkeypatch)
    Folder(redis_client, "c", FoldSettings(block_ms=1)).restore()
    assert sum(counts) == 1
    replay(redis_client, "full", TRACES / "node-lost.jsonl")
    fold_all(redis_client, "full")
    _same_store(redis_client, "c", "full")


def _lines(name: str) -> list[bytes]:
    return [event.raw for event in TraceReader(TRACES / name)]


def _head_middle_tail(
    client,
    cluster: str,
    parts: list[list[bytes]],
    crash: bool,
    counts: list[int] | None = None,
    late: list[bytes] = (),
) -> Folder:
    """A worker folds the head, snapshots (a window's end), folds and flushes the middle,
    then the tail arrives: it folds that too, or is killed and a successor restores
    (``counts``: emptied just before, so it holds the successor's writes); ``late``
    arrives after that, folded by whichever worker is live."""
    head, middle, tail = parts
    store.append(client, cluster, head)
    first = fold_all(client, cluster)
    first.snapshot()
    store.append(client, cluster, middle)
    while first.step():
        pass
    first.flush()
    store.append(client, cluster, tail)
    if crash:
        if counts is not None:
            counts.clear()
        successor = Folder(client, cluster, FoldSettings(block_ms=1))
        successor.restore()
        store.append(client, cluster, late)
        while successor.step():
            pass
        successor.flush()
    else:
        store.append(client, cluster, late)
        while first.step():
            pass
        first.flush()
    return first


def test_after_a_crash_only_what_came_after_the_last_flush_is_written(redis_client, monkeypatch):
    lines = [raw for trace in sorted(TRACES.glob("*.jsonl")) for raw in _lines(trace.name)]
    third = len(lines) // 3  # pods go on changing from one part to the next
    parts = [lines[:third], lines[third : 2 * third], lines[2 * third :]]
    _head_middle_tail(redis_client, "uncrashed", parts, crash=False)
    counts = _written_counts(monkeypatch)
    first = _head_middle_tail(redis_client, "c", parts, crash=True, counts=counts)
    probe = Folder(redis_client, "probe")
    probe.fold([("1-0", raw) for raw in parts[0] + parts[1]])
    probe.dirty.clear()
    probe.fold([("2-0", raw) for raw in parts[2]])
    changed = {uid for uid in probe.dirty if uid in probe.timeline.pods and ":" not in uid}
    assert 0 < counts[0] == len(changed) < len(first.written)  # the successor's flush
    _same_store(redis_client, "c", "uncrashed")


def test_pods_flushed_after_the_snapshot_move_from_where_they_were_written(redis_client):
    """What the successor knows of a pod flushed after the snapshot is what the store
    holds, not the snapshot's: when it changes again, its old index entries go."""
    lines = [raw for trace in sorted(TRACES.glob("*.jsonl")) for raw in _lines(trace.name)]
    third = len(lines) // 3
    parts = [lines[:third], lines[third : 2 * third], []]
    late = lines[2 * third :]
    _head_middle_tail(redis_client, "uncrashed", parts, crash=False, late=late)
    _head_middle_tail(redis_client, "c", parts, crash=True, late=late)
    _same_store(redis_client, "c", "uncrashed")


def _node_lines(path: Path) -> tuple[list[bytes], list[bytes]]:
    """The trace's lines up to its first Node change after the nodes were added, and the
    Node changes after that."""
    lines = [event.raw for event in TraceReader(path)]
    changes = [i for i, raw in enumerate(lines) if b'"MODIFIED"' in raw and b'"Node"' in raw]
    first = changes[0]
    return lines[:first], [lines[i] for i in changes]


def test_node_changes_reach_the_nodes_summary_at_most_once_a_second(redis_client, monkeypatch):
    before, node_changes = _node_lines(TRACES / "node-lost.jsonl")
    store.append(redis_client, "c", before)
    folder = fold_all(redis_client, "c")
    assert orjson.loads(store.fold_state(redis_client, "c")["nodes_json"])["worker-3"]["ready"]
    clock = [1000.0]
    folder.clock = lambda: clock[0]
    folder.last_flush = folder.nodes_written = clock[0]
    rebuilt = []
    real = folder._nodes
    monkeypatch.setattr(folder, "_nodes", lambda: rebuilt.append(clock[0]) or real())
    for raw in node_changes:  # node-only changes, no pod changed: a flush still comes
        store.append(redis_client, "c", [raw])
        clock[0] += 0.3
        folder.step()
    clock[0] += 1.0
    folder.step()
    assert rebuilt  # the node's new state was written without any pod changing
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(rebuilt))
    nodes = orjson.loads(store.fold_state(redis_client, "c")["nodes_json"])
    assert nodes["worker-3"]["ready"] != "True"


def test_the_next_window_in_the_same_process_takes_the_fold_worker_over(redis_client):
    from handoff import tasks

    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    folder = fold_all(redis_client, "c")
    folder.snapshot()  # a window ended cleanly
    tasks._warm["c"] = folder
    assert tasks._take_over(redis_client, "c", None) is folder
    assert tasks._warm == {}
    # Someone folded meanwhile: the kept worker is stale, the snapshot is restored.
    tasks._warm["c"] = folder
    redis_client.hset(store.fold_key("c"), "cursor", "99999999999999-0")
    successor = tasks._take_over(redis_client, "c", None)
    assert successor is not folder
    assert set(successor.timeline.pods) == set(folder.timeline.pods)
    # A process keeps one: another cluster's fold drops it.
    tasks._warm["c"] = folder
    replay(redis_client, "other", TRACES / "failed.jsonl")
    tasks._take_over(redis_client, "other", None)
    assert tasks._warm == {}


def test_a_fold_behind_the_stream_never_sleeps(redis_client, monkeypatch):
    import handoff.live.fold as ingest

    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    folder = Folder(redis_client, "c", FoldSettings(block_ms=50, batch=5))
    slept: list[float] = []
    monkeypatch.setattr(ingest.time, "sleep", slept.append)
    counts = []
    while (count := folder.step()) == 5:  # every read full: behind
        counts.append(count)
    assert len(counts) >= 3
    assert slept == []
    # Caught up with changes to flush: now it waits for their flush instead of polling.
    folder.step()
    assert slept


def test_a_pod_merged_into_another_loses_its_stored_view_at_once(redis_client, tmp_path):
    """The kubelet's events about a static pod name its config hash; a view written for
    that uid before the mirror pod arrived must go when the two are merged, not wait for
    a restore (which a clean hand-over no longer does)."""
    recorded = tmp_path / "manual.jsonl"
    run(find_scenario("manual-scheduling", None), Options(seed=3), record=recorded)  # type: ignore[arg-type]
    # The events watch ahead of the pods watch: the kubelet's events about static pods
    # (by config hash) come before their mirror pods.
    lines = recorded.read_bytes().splitlines(keepends=True)
    ahead = [
        line
        for line in lines
        if b'"kind":"Event"' in line
        and "-" not in orjson.loads(line)["object"].get("involvedObject", {}).get("uid", "-")
    ]
    assert ahead
    trace = tmp_path / "raced.jsonl"
    trace.write_bytes(b"".join(lines[:1] + ahead + [x for x in lines[1:] if x not in ahead]))
    replay(redis_client, "c", trace)
    folder = Folder(redis_client, "c", FoldSettings(block_ms=1, batch=5))
    hashes = set()
    while folder.step():
        folder.flush()  # what each batch changed stored before the next
        hashes |= {uid for uid in folder.written if "-" not in uid}
    folder.flush()
    assert hashes, "the kubelet's events named static pods by their config hash"
    timeline, _ = fold_file(trace)
    offline = {uid for uid in timeline.pods if not uid.startswith("name:")}
    assert set(queries.pod_views(redis_client, "c")) == offline
    assert not hashes & set(folder.written)


def test_the_sweep_turns_an_unfinished_deletion_stuck_terminating_without_an_event(
    redis_client, tmp_path
):
    """api-0 is deleted by the taint-eviction controller at 360 s with grace 30 on a lost
    node: ``evicted`` when the cut trace ends (360 s); past 390 s + stuck_after, with no
    new event, the sweep
    must make it ``stuck-terminating`` (and the verdict index, which /metrics counts)."""
    lines = (TRACES / "stuck-terminating.jsonl").read_bytes().splitlines()
    until = b'"observed":"2026-03-01T09:06:40'  # 400 s
    kept = [line for line in lines if b'"observed"' not in line or line[:45] < b"{" + until]
    (tmp_path / "cut.jsonl").write_bytes(b"\n".join(kept) + b"\n")
    replay(redis_client, "c", tmp_path / "cut.jsonl")
    folder = fold_all(redis_client, "c")
    api = next(uid for uid, pod in folder.timeline.pods.items() if pod.name == "api-0")
    assert folder.written[api][0] == "evicted"
    assert api in folder.timed

    folder.timeline.last_observed += 30 + folder.settings.stuck_after + 10  # to 460 s
    folder.sweep()

    assert folder.written[api][0] == "stuck-terminating"
    assert queries.pod_views(redis_client, "c")[api]["reason"] == "node-not-ready"
    assert api not in folder.timed
    assert redis_client.zcard(store.index_key("c", "verdict", "stuck-terminating")) == 3
