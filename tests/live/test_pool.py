"""The watch pool's judgement (handoff/live/hosts.py) on a real Redis: when unheld streams
mean a full pool, and when they do not."""

from __future__ import annotations

import time

from handoff.live import clusters, health, hosting, hosts, leases, store
from tests.live.helpers import register


def _hold(client, cluster: str, stream: str) -> None:
    assert leases.Lease(client, store.lease_key(cluster, stream), "h1", 30).acquire()


def test_a_full_host_with_streams_waiting_is_a_full_pool(redis_client):
    register(redis_client, "a", "kubeconfig", kubeconfig="/k")
    register(redis_client, "b", "kubeconfig", kubeconfig="/k")
    for stream in (*clusters.WATCH_RESOURCES, clusters.FOLD):
        _hold(redis_client, "a", stream)
    hosts.note_host(redis_client, "h1", capacity=4, held=4, until=time.time() + 10)
    pool = hosts.pool(redis_client, time.time())
    assert pool.full
    expected = "watch pool full: 4 streams unheld (capacity 4 per worker × 1 workers)"  # noqa: RUF001
    assert pool.problem() == expected
    report = health.check_streams(redis_client, time.time(), health.StreamLimits())
    assert report["b"]["pods"]["problem"] == expected
    assert report["a"]["pods"]["ok"]
    assert health.cluster_state(report["b"]) == "failing"


def test_room_on_any_live_host_is_not_a_full_pool(redis_client):
    register(redis_client, "a", "kubeconfig", kubeconfig="/k")
    hosts.note_host(redis_client, "h1", capacity=4, held=4, until=time.time() + 10)
    hosts.note_host(redis_client, "h2", capacity=4, held=0, until=time.time() + 10)
    pool = hosts.pool(redis_client, time.time())
    assert pool.unheld == 4
    assert pool.room == 4
    assert not pool.full
    assert pool.problem() is None
    report = health.check_streams(redis_client, time.time(), health.StreamLimits())
    assert health.cluster_state(report["a"]) == "starting"  # a host takes them next


def test_no_live_host_is_left_to_the_unheld_limit(redis_client):
    """With no host at all nothing says "full": the stream fails after
    HANDOFF_STREAM_UNHELD_LIMIT as "no holder" (no worker, or no beat)."""
    register(redis_client, "a", "kubeconfig", kubeconfig="/k")
    hosts.note_host(redis_client, "dead", capacity=4, held=4, until=time.time() + 1)
    assert hosts.live_hosts(redis_client, time.time() + 2) == {}
    assert not hosts.pool(redis_client, time.time() + 2).full


def test_a_killed_hosts_record_goes_with_the_next_live_hosts_note_and_never_with_a_read(
    redis_client,
):
    now = time.time()
    hosts.note_host(redis_client, "dead", capacity=4, held=4, until=now + 1, now=now)
    redis_client.hset(hosts.HOSTS, "garbled", b"{not json")
    assert hosts.live_hosts(redis_client, now + 2) == {}
    hosts.standing(redis_client, now + 2)
    assert redis_client.hlen(hosts.HOSTS) == 2  # readers only read
    # "dead" renews its record after a reader judged it stale: a reader that deleted what
    # it judged (as readers did) would now take a live host's record away.
    hosts.note_host(redis_client, "dead", capacity=4, held=1, until=now + 12, now=now + 2)
    assert not redis_client.hexists(hosts.HOSTS, "garbled")  # not a record: deleted
    hosts.note_host(redis_client, "h1", capacity=4, held=0, until=now + 12, now=now + 3)
    assert set(hosts.live_hosts(redis_client, now + 3)) == {"dead", "h1"}
    hosts.note_host(redis_client, "h1", capacity=4, held=0, until=now + 30, now=now + 13)
    assert redis_client.hkeys(hosts.HOSTS) == [b"h1"]  # "dead" stopped renewing: gone


def test_a_finished_simulator_run_waits_for_nobody(redis_client):
    register(redis_client, "s", "simulator", scenario="steady")
    _hold(redis_client, "s", clusters.FOLD)
    store.note_stream(redis_client, "s", "simulator", finished=time.time())
    hosts.note_host(redis_client, "h1", capacity=1, held=1, until=time.time() + 10)
    pool = hosts.pool(redis_client, time.time())
    assert pool.unheld == 0
    assert not pool.full


def _waiting(cluster: str, stream: str, lease, stopper) -> None:
    """A stream that runs until stopped (what a watch does with a quiet API server)."""
    stopper.event.wait(30)


def _host(client, name: str, capacity: int) -> hosting.StreamHost:
    return hosting.StreamHost(
        client,
        name,
        capacity,
        _waiting,
        lambda cluster, stream: leases.Lease.of_stream(client, cluster, stream, name, 30),
    )


def test_a_host_takes_up_to_its_capacity_and_lets_go_of_removed_clusters(redis_client):
    register(redis_client, "a", "kubeconfig", kubeconfig="/k")
    register(redis_client, "b", "kubeconfig", kubeconfig="/k")
    first, second = _host(redis_client, "h1", 6), _host(redis_client, "h2", 6)
    first.reconcile()
    second.reconcile()
    holders = [
        leases.holder(redis_client, c, s)
        for c in ("a", "b")
        for s in (*clusters.WATCH_RESOURCES, "fold")
    ]
    assert sorted(holders) == ["h1"] * 6 + ["h2"] * 2  # never both, never more than 6
    assert len(redis_client.keys("handoff:{*}:lease:*")) == 8
    clusters.unregister_cluster(redis_client, "a")
    clusters.unregister_cluster(redis_client, "b")
    first.reconcile()
    second.reconcile()
    for host in (first, second):
        for run in host.running.values():
            run.thread.join(5)
    assert not redis_client.keys("handoff:{*}:lease:*")
    first.stop_all()
    second.stop_all()
