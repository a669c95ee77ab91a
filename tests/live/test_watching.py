"""Watch streams through the official client against the simulator's HTTP API, in-process:
list then watch, checkpoints, and what a 410 after a blind gap leaves behind."""

from __future__ import annotations

import threading
import time

from kubernetes import client as k8s

from handoff.live import queries, store
from handoff.live.sources.base import WatchSettings
from handoff.live.sources.kube import KubeSource
from handoff.live.sources.sink import StreamSink
from handoff.live.sources.watching import watch_step
from handoff.sim.serve.server import SimServer

from .helpers import everything_in, fold_all

SETTINGS = WatchSettings(server_timeout=1, read_timeout=5, lease_ttl=3)


def _source(server: SimServer) -> KubeSource:
    return KubeSource(k8s.ApiClient(k8s.Configuration(host=server.address)))


def _virtual(server: SimServer) -> float:
    return server.cluster.loop.elapsed


def _watch_until(source, sink, resource, done) -> None:
    while not done():
        watch_step(source, sink, resource, SETTINGS, lambda: not done())


def test_it_lists_then_watches_and_checkpoints_the_version(served, redis_client):
    server, _ = served
    source = _source(server)
    sink = StreamSink(redis_client, "sim", "pods")
    assert watch_step(source, sink, "pods", SETTINGS, lambda: True) == "listed"
    listed = store.stream_state(redis_client, "sim", "pods")
    assert listed["rv"]
    assert int(listed["events"]) >= 1
    assert watch_step(source, sink, "pods", SETTINGS, lambda: True) == "watched"
    assert int(store.stream_state(redis_client, "sim", "pods")["rv"]) > int(listed["rv"])


def test_it_prefers_events_k8s_io_when_the_cluster_serves_it(served):
    assert _source(served[0]).api_version("events") == ("events.k8s.io/v1", "Event")


def test_pods_deleted_while_blind_are_recorded_deleted_at_an_unknown_time(served, redis_client):
    server, _ = served
    source = _source(server)
    threads = [
        threading.Thread(
            target=_watch_until,
            args=(source, StreamSink(redis_client, "sim", r), r, lambda: _virtual(server) > 170),
        )
        for r in ("nodes", "events")
    ]
    for thread in threads:
        thread.start()
    pods = StreamSink(redis_client, "sim", "pods")
    _watch_until(source, pods, "pods", lambda: _virtual(server) > 45)
    # Blind from ~45 s to ~130 s: PodGC deletes ghost3, the kubelet replaces a mirror pod.
    while _virtual(server) < 130:
        time.sleep(0.05)
    with server.lock:  # the API server forgets everything older: the next watch gets 410
        server.api.stores["pods"].compacted = server.api.rv
    assert watch_step(source, pods, "pods", SETTINGS, lambda: True) == "gone"
    assert watch_step(source, pods, "pods", SETTINGS, lambda: True) == "listed"
    _watch_until(_source(server), pods, "pods", lambda: _virtual(server) > 170)
    for thread in threads:
        thread.join()

    fold_all(redis_client, "sim")
    views = {v["name"]: v for v in queries.pod_views(redis_client, "sim").values()}
    ghost = views["ghost3"]
    assert ghost["milestones"]["deleted"] is not None
    assert ghost["deleted_blind"]["stream"] == "pods"
    assert ghost["deleted_blind"]["from"] < ghost["deleted_blind"]["to"]
    assert views["plain"]["deleted_blind"] is None
    blind = store.known(redis_client, "sim", "pods")
    assert ghost["uid"] not in blind
    assert redis_client.llen(store.blind_key("sim")) == 1


def test_a_watched_pod_with_secrets_leaves_none_in_redis(served, redis_client):
    server, _ = served
    body = {
        "metadata": {
            "name": "leaky",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "hunter2"},
        },
        "spec": {
            "nodeName": "worker-2",
            "containers": [
                {"name": "c", "image": "nginx", "env": [{"name": "PW", "value": "hunter2"}]}
            ],
        },
    }
    server.create_pod("default", body)
    source = _source(server)
    sink = StreamSink(redis_client, "sim", "pods")
    watch_step(source, sink, "pods", SETTINGS, lambda: True)
    watch_step(source, sink, "pods", SETTINGS, lambda: True)
    fold_all(redis_client, "sim").snapshot()
    blob = everything_in(redis_client)
    assert b"leaky" in blob
    assert b"hunter2" not in blob
    assert b"last-applied" not in blob
