"""A fold worker SIGKILLed between two snapshots while Redis is SIGKILLed too and restarted
from its append-only file: the successor writes only what its predecessor's flushes did
not, and the store ends as a fold without the crash leaves it (issue 19)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import redis

from handoff.live import aggregates, queries, search, store
from handoff.live.fold import Folder, FoldSettings
from handoff.sim import Options, find_scenario, run
from tests.conftest import stop, wait_until
from tests.hardening.test_fault_suite import _aof_redis

from .helpers import fold_all
from .test_fold_pauses import _same_store

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "crashed"
# The worker as the fold task runs it, but slowed (small reads) and snapshotting often,
# so that it is killed with flushes after its last snapshot and a stream left to fold.
# Told to (a key), it takes no more snapshots: the test then knows the last one.
WORKER = """
import dataclasses, sys, redis
from handoff.live.fold import Folder, FoldSettings
client = redis.Redis.from_url(sys.argv[1])
settings = FoldSettings(batch=100, block_ms=5, snapshot_interval=0.3, backlog_push_interval=0.1)
folder = Folder(client, sys.argv[2], settings)
folder.restore()
while True:
    if folder.settings is settings and client.exists("no-more-snapshots"):
        if folder.saver is not None:
            folder._reap(wait=True)
        never = dict(snapshot_interval=1e9, snapshot_events=10**9)
        folder.settings = dataclasses.replace(settings, **never)
        client.set("snapshots-stopped", 1)
    folder.step()
"""


def _scale_lines(tmp_path: Path) -> list[bytes]:
    """The simulator's scale scenario, small: 20 nodes, 400 pods and 30 s of churn."""
    recorded = tmp_path / "scale.jsonl"
    options = Options(seed=5, nodes=20, pods=400, churn=20.0, duration=30.0)
    run(find_scenario("scale", None), options, record=recorded)  # type: ignore[arg-type]
    return recorded.read_bytes().splitlines()[1:]  # the header is not an event


def _append(client: redis.Redis, cluster: str, lines: list[bytes]) -> None:
    pipe = client.pipeline(transaction=False)  # one fsync of the AOF, not one a line
    store.append(pipe, cluster, lines)
    pipe.execute()


def _cursor_past_snapshot(client: redis.Redis) -> bool:
    state = store.fold_state(client, CLUSTER)
    snapshot, cursor = state.get("snapshot"), state.get("cursor")
    return bool(snapshot and cursor) and store.stream_id_key(cursor) > store.stream_id_key(snapshot)


def test_a_worker_and_redis_killed_mid_fold_restore_to_the_uncrashed_store(tmp_path, monkeypatch):
    lines = _scale_lines(tmp_path)
    directory = tmp_path / "redis"
    directory.mkdir()
    proc, url = _aof_redis(directory)
    client = redis.Redis.from_url(url)
    worker = None
    try:
        fed = len(lines) // 2
        _append(client, CLUSTER, lines[:fed])
        worker = subprocess.Popen([sys.executable, "-c", WORKER, url, CLUSTER], cwd=ROOT)
        # Fed while it folds, each part flushed before the next, past a snapshot; then
        # no more snapshots, one more part flushed, and one more it is folding when killed.
        last = lambda: client.xrevrange(store.events_key(CLUSTER), count=1)[0][0].decode()  # noqa: E731

        def feed_and_flush() -> int:
            _append(client, CLUSTER, lines[fed : fed + 100])
            end = last()
            wait_until(
                lambda: store.fold_state(client, CLUSTER).get("cursor") == end,
                60,
                "the worker to flush what it was fed",
            )
            return fed + 100

        while fed < len(lines) * 3 // 4 or "snapshot" not in store.fold_state(client, CLUSTER):
            assert fed < len(lines) - 300, "the worker never took a snapshot"
            fed = feed_and_flush()
        client.set("no-more-snapshots", 1)
        wait_until(lambda: client.exists("snapshots-stopped"), 60, "snapshots to stop")
        fed = feed_and_flush()
        assert _cursor_past_snapshot(client)
        _append(client, CLUSTER, lines[fed : fed + 100])
        fed += 100
        # Redis first, while the worker is writing, then the worker: nothing is told.
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        proc, _ = _aof_redis(directory, port=port)
        assert client.xlen(store.events_key(CLUSTER)) == fed  # the AOF kept every entry
        flushed = store.fold_state(client, CLUSTER)
        assert store.stream_id_key(flushed["cursor"]) > store.stream_id_key(flushed["snapshot"])
        later = (fed + len(lines)) // 2
        _append(client, CLUSTER, lines[fed:later])  # what came while no worker ran
        written: list[int] = []
        real = store.write_pods
        monkeypatch.setattr(
            store,
            "write_pods",
            lambda pipe, cluster, views, previous: (
                written.append(len(views)),
                real(pipe, cluster, views, previous),
            )[1],
        )
        successor = Folder(client, CLUSTER, FoldSettings(block_ms=1))
        successor.restore()
        monkeypatch.setattr(store, "write_pods", real)
        assert 0 < sum(written) < len(successor.written) // 2  # not every view again
        _append(client, CLUSTER, lines[later:])  # and what comes once it is live
        while successor.step():
            pass
        successor.flush()
        _append(client, "uncrashed", lines)
        fold_all(client, "uncrashed")
        _same_store(client, CLUSTER, "uncrashed")
        _same_aggregates(client, CLUSTER, "uncrashed")
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
        client.close()
        stop(proc)


def _same_aggregates(client: redis.Redis, mine: str, full: str) -> None:
    """The fleet's kept histograms and swimlane, and the name index's answers, are the
    uncrashed fold's: each part of a flush carried its own share of them."""
    assert client.hgetall(aggregates.hist_key(mine)) == client.hgetall(aggregates.hist_key(full))
    assert client.zrange(aggregates.recent_key(mine), 0, -1, withscores=True) == client.zrange(
        aggregates.recent_key(full), 0, -1, withscores=True
    )
    nodes = {view["node"] for view in queries.pod_views(client, full).values() if view["node"]}
    for node in sorted(nodes):
        assert client.hgetall(aggregates.node_hist_key(mine, node)) == client.hgetall(
            aggregates.node_hist_key(full, node)
        ), node
    names = sorted({(v["namespace"], v["name"]) for v in queries.pod_views(client, full).values()})
    for namespace, name in names[:: max(1, len(names) // 25)]:
        text = search.fold(namespace, name)
        found = {
            uid: folded
            for uid, (folded, _) in search.lookup(
                client, mine, search.candidates(client, mine, text)
            ).items()
        }
        expected = {
            uid: folded
            for uid, (folded, _) in search.lookup(
                client, full, search.candidates(client, full, text)
            ).items()
        }
        assert found == expected, text
