"""One lease type for the three stream tasks: renewed from a thread, each renewal noted in
the stream's hash (what /healthz reads), and a lost lease stops its holder."""

from __future__ import annotations

import threading

from handoff.live import leases, store
from tests.conftest import wait_until


def test_a_kept_stream_lease_is_renewed_and_each_renewal_noted(redis_client) -> None:
    lease = leases.Lease.of_stream(redis_client, "c", "pods", "me", ttl=3)
    assert lease.acquire()
    assert not leases.Lease.of_stream(redis_client, "c", "pods", "other", ttl=3).acquire()
    stop = threading.Event()
    keeper = lease.keep(stop)
    try:
        assert keeper.name == "lease c/pods"
        wait_until(
            lambda: store.stream_state(redis_client, "c", "pods").get("renewed"),
            15,
            "a renewal noted in the stream's hash",
        )
        assert leases.holder(redis_client, "c", "pods") == "me"
        assert redis_client.pttl(store.lease_key("c", "pods")) > 0
    finally:
        stop.set()
        keeper.join(timeout=5)
    lease.release()
    assert leases.holder(redis_client, "c", "pods") is None


def test_a_lease_someone_else_took_stops_its_keeper(redis_client) -> None:
    lease = leases.Lease.of_stream(redis_client, "c", "fold", "me", ttl=3)
    assert lease.acquire()
    redis_client.set(store.lease_key("c", "fold"), "someone else")
    stop, lost = threading.Event(), threading.Event()
    keeper = lease.keep(stop, lost.set)
    assert lost.wait(15), "the keeper never noticed the lease was gone"
    assert stop.is_set()
    keeper.join(timeout=5)
    lease.release()  # not ours: left alone
    assert leases.holder(redis_client, "c", "fold") == "someone else"
    assert "renewed" not in store.stream_state(redis_client, "c", "fold")
