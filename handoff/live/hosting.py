"""A stream host: one watch worker process holding many streams, each in a thread of its
own under its own lease (the ``kubernetes`` client's watch blocks, so threads, not asyncio).

Every ``interval`` seconds the host reconciles against the cluster registry: streams of
removed clusters are stopped (their leases released), and configured streams nobody holds
are taken, up to ``capacity``, by SET NX on their lease, so two hosts never hold one
stream. A killed host's leases lapse after their ttl and another host with room takes the
streams at its next reconcile. The host notes itself in the pool (``handoff.live.hosts``)
so a full pool is reported, not silent.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from handoff.live import clusters, hosts, leases

log = logging.getLogger(__name__)


class Stopper:
    """Ends one stream's run from another thread: sets ``event`` and calls what the run
    registered (a watch's ``WatchLoop.stop``, which also interrupts its open request)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._callbacks: list[Callable[[], object]] = []
        self._lock = threading.Lock()

    def on_stop(self, callback: Callable[[], object]) -> None:
        with self._lock:
            self._callbacks.append(callback)
            stopped = self.event.is_set()
        if stopped:
            callback()

    def discard(self, callback: Callable[[], object]) -> None:
        """Forget a callback whose run has ended (a watch window over)."""
        with self._lock, contextlib.suppress(ValueError):
            self._callbacks.remove(callback)

    def stop(self) -> None:
        with self._lock:
            self.event.set()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()


# Runs one stream until it ends or the stopper stops it: (cluster, stream, lease, stopper).
RunStream = Callable[[str, str, leases.Lease, Stopper], object]
MakeLease = Callable[[str, str], leases.Lease]


@dataclass
class _Running:
    thread: threading.Thread
    stopper: Stopper
    lease: leases.Lease


@dataclass
class StreamHost:
    """Holds up to ``capacity`` streams; ``run`` until ``stop``."""

    client: redis.Redis
    name: str  # the holder id written in every lease it takes
    capacity: int
    run_stream: RunStream
    make_lease: MakeLease
    interval: float = 2.0
    # How long the host's pool record counts without a reconcile: a killed host leaves the
    # pool once its leases have lapsed too (the lease ttl), so supervise can replace it.
    record_ttl: float = 6.0
    running: dict[tuple[str, str], _Running] = field(default_factory=dict)
    halt: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        """Reconcile every ``interval`` until ``stop``; then stop every stream and leave
        the pool. A Redis error skips one reconcile (the streams keep running)."""
        try:
            while not self.halt.is_set():
                try:
                    self.reconcile()
                except redis.RedisError as exc:
                    log.warning("stream host %s: reconcile skipped: %s", self.name, exc)
                self.halt.wait(self.interval)
        finally:
            self.stop_all()
            with contextlib.suppress(redis.RedisError):  # else its record lapses on its own
                hosts.drop_host(self.client, self.name)

    def stop(self) -> None:
        """From any thread (the worker's SIGTERM): end ``run`` soon."""
        self.halt.set()

    def reconcile(self) -> None:
        """Stop streams no longer configured, reap ended ones, take unheld ones with room."""
        configured = clusters.clusters(self.client)
        wanted = {
            (name, stream)
            for name, config in configured.items()
            for stream in hosts.wanted(config, self.client)
        }
        for key, run in list(self.running.items()):
            if key not in wanted:
                log.info("stream host %s: %s/%s no longer configured", self.name, *key)
                run.stopper.stop()
            if not run.thread.is_alive():
                del self.running[key]
        free = [key for key in wanted if key not in self.running]
        random.shuffle(free)  # hosts racing for new streams spread them
        for cluster, stream in free:
            if len(self.running) >= self.capacity or self.halt.is_set():
                break
            if leases.holder(self.client, cluster, stream) is None:
                self._take(cluster, stream)
        hosts.note_host(
            self.client,
            self.name,
            self.capacity,
            len(self.running),
            time.time() + max(self.record_ttl, 2 * self.interval + 1),
        )

    def _take(self, cluster: str, stream: str) -> None:
        lease = self.make_lease(cluster, stream)
        if not lease.acquire():
            return  # another host was quicker
        stopper = Stopper()
        thread = threading.Thread(
            target=self._run_one,
            args=(cluster, stream, lease, stopper),
            daemon=True,
            name=f"stream {cluster}/{stream}",
        )
        self.running[(cluster, stream)] = _Running(thread, stopper, lease)
        thread.start()

    def _run_one(self, cluster: str, stream: str, lease: leases.Lease, stopper: Stopper) -> None:
        try:
            self.run_stream(cluster, stream, lease, stopper)
        except Exception as exc:  # noted in the stream's hash by the run; retried next reconcile
            log.warning("%s/%s: stopped by %s", cluster, stream, type(exc).__name__)
        finally:
            with contextlib.suppress(redis.RedisError):  # else it lapses after its ttl
                lease.release()

    def stop_all(self, timeout: float = 45.0) -> None:
        """Stop every stream and wait (up to ``timeout`` in all: a big fold's last snapshot
        takes seconds; docker-compose allows the watcher 60 s) for each to release."""
        for run in self.running.values():
            run.stopper.stop()
        deadline = time.monotonic() + timeout
        for run in self.running.values():
            run.thread.join(max(0.0, deadline - time.monotonic()))
        self.running.clear()
