"""The fold worker turns a cluster's stream into the same timelines as the offline fold."""

from __future__ import annotations

from pathlib import Path

import orjson

from handoff.core.report import build_report
from handoff.core.trace import TraceReader
from handoff.live import queries, store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.sources.playback import replay
from handoff.offline.triage import fold_file

from .helpers import fold_all, stable

TRACES = Path(__file__).parent.parent / "data" / "traces"


def _offline(path: Path) -> dict:
    timeline, _ = fold_file(path)
    return stable(build_report(timeline)["pods"])


def test_it_stores_the_same_timelines_as_the_offline_fold(redis_client):
    for trace in sorted(TRACES.glob("*.jsonl")):
        cluster = trace.stem
        replay(redis_client, cluster, trace)
        fold_all(redis_client, cluster)
        assert stable(queries.pod_views(redis_client, cluster)) == _offline(trace), trace.name


def test_it_indexes_pods_by_verdict_namespace_and_node(redis_client):
    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    fold_all(redis_client, "c")
    views = queries.pod_views(redis_client, "c")
    for uid, view in views.items():
        assert uid in store.pods_by(redis_client, "c", "verdict", view["verdict"])
        assert uid in store.pods_by(redis_client, "c", "ns", view["namespace"])
        assert uid in store.pods_by(redis_client, "c", "node", view["node"] or "")


def test_it_changes_nothing_when_a_batch_is_delivered_twice(redis_client):
    trace = TRACES / "evicted-noexecute.jsonl"
    replay(redis_client, "once", trace)
    replay(redis_client, "twice", trace)
    # The same batch again, as an at-least-once path (a watch retried, a replay rerun) does.
    lines = [event.raw for event in TraceReader(trace)]
    pipe = redis_client.pipeline()
    store.append(pipe, "twice", lines[len(lines) // 2 :])
    pipe.execute()
    fold_all(redis_client, "once")
    fold_all(redis_client, "twice")
    assert stable(queries.pod_views(redis_client, "twice")) == stable(
        queries.pod_views(redis_client, "once")
    )


def test_a_successor_restores_the_snapshot_and_folds_only_the_tail(redis_client):
    trace = TRACES / "node-lost.jsonl"
    lines = [event.raw for event in TraceReader(trace)]
    half = len(lines) // 2
    store.append(redis_client, "c", lines[:half])
    first = fold_all(redis_client, "c")
    first.snapshot()
    store.append(redis_client, "c", lines[half:])
    second = Folder(redis_client, "c", FoldSettings(block_ms=1))
    second.load()
    assert second.events == len(lines) - half
    fold_all(redis_client, "c")
    assert stable(queries.pod_views(redis_client, "c")) == _offline(trace)


def test_it_refuses_a_snapshot_that_is_not_data_and_folds_the_stream_instead(redis_client):
    trace = TRACES / "node-lost.jsonl"
    replay(redis_client, "c", trace)
    # A pickle that would run code if anything unpickled it.
    hostile = b"cos\nsystem\n(S'touch /tmp/handoff-pwned'\ntR."
    redis_client.set(store.snapshot_key("c"), hostile)
    folder = Folder(redis_client, "c", FoldSettings(block_ms=1))
    folder.load()
    assert folder.events == len(list(TraceReader(trace)))
    assert not Path("/tmp/handoff-pwned").exists()


def test_it_pushes_changed_pods_with_a_growing_cursor(redis_client):
    sent = []

    class Recorder:
        def publish(self, message):
            sent.append(message)

    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    folder = Folder(redis_client, "c", FoldSettings(block_ms=1, batch=3), Recorder())
    while folder.step():
        pass
    folder.flush()
    cursors = [store.stream_id_key(m["data"]["cursor"]) for m in sent]
    assert cursors == sorted(cursors)
    assert all(m["type"] == "cluster.update" for m in sent)
    assert {p["name"] for m in sent for p in m["data"]["pods"]}
    orjson.dumps(sent)  # what the channel layer carries is plain JSON


def test_it_notes_the_newest_pod_that_came_to_need_attention(redis_client):
    replay(redis_client, "c", TRACES / "node-lost.jsonl")
    fold_all(redis_client, "c")
    incident = orjson.loads(store.fold_state(redis_client, "c")["last_incident"])
    view = next(
        x for x in queries.pod_views(redis_client, "c").values() if x["name"] == incident["name"]
    )
    assert incident["verdict"] == view["verdict"] == "node-lost"
    assert incident["namespace"] == view["namespace"]
    # Noted at the flush that judged it so (later flushes move the clock on).
    assert incident["at"] <= store.fold_state(redis_client, "c")["evaluated_at"]
