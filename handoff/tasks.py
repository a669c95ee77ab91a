"""Celery tasks. Kept thin: each one calls domain or store code and returns.

Streams (queue ``watch``) run in stream hosts: ``host`` is one long task per watch worker
process holding many streams, each in a thread under a Redis lease for its (cluster,
stream), so at most one holder runs per stream whatever the number of workers
(``handoff.live.hosting``). ``supervise`` (beat) starts a host when streams wait and no
live host has room. ``watch``, ``fold`` and ``simulate`` run one stream for one window in
a task of their own (benchmarks, one-off runs); at its end the stream goes to a host.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
from celery import shared_task
from celery.signals import worker_shutting_down

from handoff import conf
from handoff.live import clusters, health, hosts, leases, store
from handoff.live.fold import Folder
from handoff.live.hosting import Stopper, StreamHost
from handoff.live.push import Publisher
from handoff.live.sources.base import SourceError
from handoff.live.sources.sink import StreamSink

log = logging.getLogger(__name__)


def _redis() -> redis.Redis:
    return conf.redis_client()


# ---------------------------------------------------------------- shutdown
# A warm shutdown (SIGTERM to the worker) waits for running tasks, and a watch task runs
# for a whole window. So the stream tasks stop early instead: they checkpoint, release
# their lease and enqueue their successor, which another worker starts at once rather
# than after the lease lapses. A pool process learns of it from the main process when it
# starts shutting down, through SIGURG (ignored by default, so idle pool processes carry
# on as before), or from a supervisor's SIGTERM to the whole group; while a stream task
# runs, it handles both by asking the task to stop.
STOP_SIGNAL = signal.SIGURG

_stopping = threading.Event()
_on_stop: list[Callable[[], object]] = []


def _stop_running_tasks() -> None:
    _stopping.set()
    # Not in the signal handler itself: the callbacks take locks the code it interrupted
    # may hold.
    threading.Thread(target=lambda: [cb() for cb in list(_on_stop)], daemon=True).start()


@worker_shutting_down.connect
def _tell_pool_processes(**_: object) -> None:
    _stop_running_tasks()  # the solo and threads pools run tasks in this process
    for pid in _children(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, STOP_SIGNAL)


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError, ValueError):
            found.extend(int(child) for child in task.read_text().split())
    return found


@contextlib.contextmanager
def on_worker_stop(callback: Callable[[], object]) -> Iterator[None]:
    """Call ``callback`` (from a thread) if the worker shuts down while the block runs."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        # billiard resets SIGTERM in pool processes after worker_process_init, to a handler
        # that exits at once: so the stop handler is installed here, for the task's length.
        for sig in (signal.SIGTERM, STOP_SIGNAL):
            previous[sig] = signal.signal(sig, _stop_handler(signal.getsignal(sig)))
    _on_stop.append(callback)
    try:
        if _stopping.is_set():
            callback()
        yield
    finally:
        _on_stop.remove(callback)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_handler(previous: object) -> Callable[[int, object], None]:
    # In a pool process the previous handler exits (billiard's); in a solo worker it is
    # Celery's warm shutdown, which must still run.
    chain = callable(previous) and getattr(previous, "__module__", "") != "billiard.common"

    def handler(signum: int, frame: object) -> None:
        _stop_running_tasks()
        if chain:
            previous(signum, frame)

    return handler


@shared_task(name="handoff.tasks.heartbeat", ignore_result=True)
def heartbeat() -> None:
    client = _redis()
    try:
        health.write_heartbeat(client, now=time.time())
    finally:
        client.close()


def _lease(client: redis.Redis, cluster: str, stream: str, task_id: str | None) -> leases.Lease:
    return leases.Lease.of_stream(
        client, cluster, stream, leases.holder_id(task_id), conf.lease_ttl()
    )


def _hand_over(client: redis.Redis, cluster: str, stream: str, lease: leases.Lease) -> None:
    """Release the stream and have a host take it, if the cluster is still configured."""
    lease.release()
    if clusters.cluster(client, cluster) is not None:
        start_stream(cluster, stream)


def start_stream(cluster: str, stream: str) -> None:
    """Have a configured stream held soon: a live stream host with room takes it at its
    next reconcile (HANDOFF_HOST_INTERVAL); when none has room, one more host is started."""
    client = _redis()
    try:
        ensure_hosts(client)
    finally:
        client.close()


def ensure_hosts(client: redis.Redis, *, force: bool = False) -> bool:
    """Start one stream host when streams wait and no live host has room (or ``force``).
    One start in flight at a time; a start no worker process could run expires with it."""
    pool = hosts.pool(client, time.time())
    if not force and (pool.unheld == 0 or pool.room > 0):
        return False
    ttl = conf.lease_ttl() * 3
    if force:
        client.delete(HOST_PENDING)
    if not client.set(HOST_PENDING, "1", nx=True, ex=ttl):
        return False
    start_host(expires=ttl)
    return True


HOST_PENDING = "handoff:hosts:pending"


def start_host(expires: float | None = None) -> None:
    from handoff.celery import app

    app.send_task("handoff.tasks.host", queue="watch", expires=expires)


def _note_start(client: redis.Redis, cluster: str, stream: str) -> None:
    """Events/s in /healthz counts from here: the holder's window."""
    events = store.stream_state(client, cluster, stream).get("events", "0")
    store.note_stream(client, cluster, stream, started=time.time(), events_at_start=events)


def _note_failure(client: redis.Redis, cluster: str, stream: str, exc: Exception) -> None:
    """E.g. no readable kubeconfig or service account: counts as a failed call, so
    /healthz names it after HANDOFF_STREAM_ERROR_LIMIT tries."""
    message = str(exc) if isinstance(exc, SourceError) else type(exc).__name__
    pipe = client.pipeline(transaction=False)
    store.note_stream(pipe, cluster, stream, last_error=message, error_at=time.time())
    pipe.hincrby(store.stream_key(cluster, stream), "failures", 1)
    pipe.execute()


def run_watch(
    client: redis.Redis,
    cluster: str,
    resource: str,
    lease: leases.Lease,
    stopper: Stopper,
    deadline: float = math.inf,
) -> str:
    """List then watch one resource of a cluster under its (acquired) lease until the
    deadline, the stopper or the lease's loss; returns which ("window", "stopping", "lost")."""
    from handoff.live.sources.kube import KubeSource
    from handoff.live.sources.watching import WatchLoop

    config = clusters.cluster(client, cluster)
    if config is None:
        return "stopping"
    client.delete(store.pending_key(cluster, resource))
    try:
        source = KubeSource.for_cluster(config)
        sink = StreamSink(client, cluster, resource, maxlen=conf.stream_maxlen())
        _note_start(client, cluster, resource)
        # Where the stream goes: `status`, the home page and the board name it (not /healthz).
        sink.note(endpoint=source.endpoint)
        loop = WatchLoop(
            source,
            sink,
            resource,
            conf.watch_settings(),
            lease,
            reconnect=lambda: KubeSource.for_cluster(config),
        )
        stopper.on_stop(loop.stop)
        try:
            return loop.run(deadline)
        finally:
            stopper.discard(loop.stop)
    except Exception as exc:
        _note_failure(client, cluster, resource, exc)
        raise


@shared_task(name="handoff.tasks.watch", bind=True, ignore_result=True)
def watch(self, cluster: str, resource: str) -> str:
    """One stream for one window, in a task of its own (stream hosts run many; see
    ``host``): list then watch one resource of a cluster under its lease."""
    client = _redis()
    lease = _lease(client, cluster, resource, self.request.id)
    if clusters.cluster(client, cluster) is None or not lease.acquire():
        return "skipped"
    stopper = Stopper()
    deadline = time.monotonic() + conf.watch_settings().window
    try:
        with on_worker_stop(stopper.stop):
            stopped = run_watch(client, cluster, resource, lease, stopper, deadline)
    except Exception:
        lease.release()
        raise
    if stopped in ("window", "stopping"):
        _hand_over(client, cluster, resource, lease)
    return stopped


# The fold worker of the last window that ended cleanly in this process, kept for its
# successor in case that lands here too (a fold task's successor often does): taking it
# over skips reloading the snapshot (~2.5 s at 200,000 pods, in which nothing is pushed).
# At most one is kept, so a process holds at most one cluster's state it no longer folds,
# until its next fold task. Stream hosts fold without windows and keep none.
_warm: dict[str, Folder] = {}


def _take_over(client: redis.Redis, cluster: str, publisher: Publisher) -> Folder:
    """The cluster's fold worker: the one this process kept, if nothing was folded since
    it stopped, else a new one restored from the snapshot."""
    kept = _warm.pop(cluster, None)
    _warm.clear()
    if kept is not None and kept.clean_at(kept.cursor):
        kept.publisher = publisher  # close() gave the collector back; it resumes at once
        return kept
    folder = Folder(client, cluster, conf.fold_settings(), publisher)
    folder.restore()
    return folder


def run_fold(
    client: redis.Redis,
    cluster: str,
    lease: leases.Lease,
    stopper: Stopper,
    deadline: float = math.inf,
    *,
    keep_warm: bool = False,
) -> str:
    """Fold the cluster's stream into pod state under its (acquired) fold lease until the
    deadline, the stopper or the lease's loss; returns which ("window", "stopping", "lost").
    Unless the lease was lost, the state is flushed and snapshotted before it returns."""
    client.delete(store.pending_key(cluster, clusters.FOLD))
    halt = threading.Event()
    lost = threading.Event()
    keeper = lease.keep(halt, lost.set)
    stopper.on_stop(halt.set)
    publisher = Publisher(cluster)
    folder: Folder | None = None
    try:
        _note_start(client, cluster, clusters.FOLD)
        folder = (
            _take_over(client, cluster, publisher)
            if keep_warm
            else _restored(client, cluster, publisher)
        )
        while not halt.is_set() and time.monotonic() < deadline:
            folded = folder.step()
            if folded:
                pipe = client.pipeline(transaction=False)
                pipe.hincrby(store.stream_key(cluster, clusters.FOLD), "events", folded)
                store.note_stream(pipe, cluster, clusters.FOLD, last_event=time.time())
                pipe.execute()
        if not lost.is_set():
            folder.flush()
            folder.snapshot()
    except Exception as exc:
        store.note_stream(
            client, cluster, clusters.FOLD, last_error=type(exc).__name__, error_at=time.time()
        )
        raise
    finally:
        stopped = "lost" if lost.is_set() else "stopping" if stopper.event.is_set() else "window"
        halt.set()
        keeper.join(timeout=5)
        publisher.close()
        if folder is not None:
            folder.close()
            if keep_warm and stopped == "window":
                _warm[cluster] = folder
    return stopped


def _restored(client: redis.Redis, cluster: str, publisher: Publisher) -> Folder:
    folder = Folder(client, cluster, conf.fold_settings(), publisher)
    folder.restore()
    return folder


@shared_task(name="handoff.tasks.fold", bind=True, ignore_result=True)
def fold(self, cluster: str) -> str:
    """One cluster's fold for one window, in a task of its own (stream hosts run many)."""
    client = _redis()
    lease = _lease(client, cluster, clusters.FOLD, self.request.id)
    if clusters.cluster(client, cluster) is None or not lease.acquire():
        return "skipped"
    stopper = Stopper()
    deadline = time.monotonic() + conf.watch_settings().window
    with on_worker_stop(stopper.stop):
        stopped = run_fold(client, cluster, lease, stopper, deadline, keep_warm=True)
    if stopped in ("window", "stopping"):
        _hand_over(client, cluster, clusters.FOLD, lease)
    return stopped


def run_simulator(client: redis.Redis, cluster: str, lease: leases.Lease, stopper: Stopper) -> str:
    """Run a simulator cluster's scenario into the cluster's stream under its (acquired)
    lease until it ends ("finished"), the stopper ("stopping") or the lease's loss."""
    from handoff.live.sources.simulator import run_simulation

    config = clusters.cluster(client, cluster)
    if config is None:
        return "stopping"
    client.delete(store.pending_key(cluster, "simulator"))
    stop = threading.Event()
    keeper = lease.keep(stop)
    stopper.on_stop(stop.set)
    sink = StreamSink(client, cluster, "simulator", track_known=False)
    _note_start(client, cluster, "simulator")
    try:
        run_simulation(sink, config, stop, speed=float(config.options.get("speed", 1.0)))
        if not stop.is_set():  # the scenario ended: nothing for a host to restart
            store.note_stream(client, cluster, "simulator", finished=time.time())
            return "finished"
    finally:
        stop.set()
        keeper.join(timeout=5)
    return "stopping" if stopper.event.is_set() else "lost"


@shared_task(name="handoff.tasks.simulate", bind=True, ignore_result=True)
def simulate(self, cluster: str) -> str:
    """A simulator cluster's scenario in a task of its own (stream hosts run many)."""
    client = _redis()
    lease = _lease(client, cluster, "simulator", self.request.id)
    if clusters.cluster(client, cluster) is None or not lease.acquire():
        return "skipped"
    stopper = Stopper()
    with on_worker_stop(stopper.stop):
        stopped = run_simulator(client, cluster, lease, stopper)
    if stopped == "stopping":
        _hand_over(client, cluster, "simulator", lease)  # a fresh run on another worker
        return stopped
    lease.release()
    return stopped


def _run_hosted(client: redis.Redis) -> Callable[[str, str, leases.Lease, Stopper], object]:
    """What a stream host runs in each stream's thread: a watch window after window (a
    fresh kubeconfig each), a fold or a simulator unwindowed."""

    def run(cluster: str, stream: str, lease: leases.Lease, stopper: Stopper) -> object:
        if stream == clusters.FOLD:
            return run_fold(client, cluster, lease, stopper)
        if stream == "simulator":
            return run_simulator(client, cluster, lease, stopper)
        return _watch_in_windows(client, cluster, stream, lease, stopper)

    return run


def _watch_in_windows(
    client: redis.Redis, cluster: str, stream: str, lease: leases.Lease, stopper: Stopper
) -> str:
    """A hosted watch, window after window (HANDOFF_WATCH_WINDOW) under the lease it
    holds, as its own task ran: each window reads the cluster's kubeconfig again, so a
    rotated token or CA is taken up while the old connection still works."""
    while True:
        deadline = time.monotonic() + conf.watch_settings().window
        stopped = run_watch(client, cluster, stream, lease, stopper, deadline)
        if stopped != "window" or stopper.event.is_set():
            return stopped


@shared_task(name="handoff.tasks.host", bind=True, ignore_result=True)
def host(self) -> str:
    """A stream host: this worker process holds up to HANDOFF_STREAMS_PER_WORKER streams,
    each in a thread under its own lease, reconciled against the registry every
    HANDOFF_HOST_INTERVAL, until the worker stops; then it releases every stream and has
    another host take them at once."""
    client = _redis()
    name = leases.holder_id(self.request.id)
    ttl = conf.lease_ttl()
    settings = conf.host_settings()
    # In the pool (with its room) before the start is no longer in flight: supervise,
    # meanwhile, starts no second host for the same streams.
    hosts.note_host(client, name, settings.capacity, 0, time.time() + ttl)
    client.delete(HOST_PENDING)
    stream_host = StreamHost(
        client,
        name,
        settings.capacity,
        _run_hosted(client),
        lambda cluster, stream: leases.Lease.of_stream(client, cluster, stream, name, ttl),
        interval=settings.interval,
        record_ttl=ttl,
    )
    log.info("stream host %s: up to %d streams", name, settings.capacity)
    with on_worker_stop(stream_host.stop):
        stream_host.run()
    if _stopping.is_set():
        ensure_hosts(client, force=True)  # another worker's process takes them at once
    client.close()
    return "stopping" if _stopping.is_set() else "stopped"


@shared_task(name="handoff.tasks.supervise", ignore_result=True)
def supervise() -> bool:
    """Start a stream host when configured streams have no holder and no live host has
    room: the first host, or one after a host was killed (its record and leases lapse)
    or the pool filled up. Beat runs this every HANDOFF_SUPERVISE_INTERVAL. A start that
    no worker process can run expires; /healthz says the pool is full meanwhile."""
    client = _redis()
    try:
        started = ensure_hosts(client)
    finally:
        client.close()
    if started:
        log.info("started a stream host")
    return started
