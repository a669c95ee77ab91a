"""Celery tasks. Kept thin: each one calls domain or store code and returns.

Long-running ones (queue ``watch``) hold a Redis lease for their (cluster, stream), so at
most one runs per stream whatever the number of workers; they run for a bounded window
and enqueue their successor. ``supervise`` (beat) restarts any stream whose lease lapsed.
"""

from __future__ import annotations

import contextlib
import logging
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
from handoff.live import clusters, health, leases, store
from handoff.live.fold import Folder
from handoff.live.push import Publisher
from handoff.live.sources.base import SourceError
from handoff.live.sources.sink import StreamSink

log = logging.getLogger(__name__)
TASK_OF = {
    "pods": "handoff.tasks.watch",
    "nodes": "handoff.tasks.watch",
    "events": "handoff.tasks.watch",
    "fold": "handoff.tasks.fold",
    "simulator": "handoff.tasks.simulate",
}


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
    """Release the stream and enqueue its successor, if the cluster is still configured."""
    lease.release()
    if clusters.cluster(client, cluster) is not None:
        client.set(store.pending_key(cluster, stream), "1", ex=conf.lease_ttl() * 3)
        start_stream(cluster, stream)


def start_stream(cluster: str, stream: str) -> None:
    args = [cluster, stream] if TASK_OF[stream] == "handoff.tasks.watch" else [cluster]
    from handoff.celery import app

    app.send_task(TASK_OF[stream], args=args, queue="watch")


def _note_start(client: redis.Redis, cluster: str, stream: str) -> None:
    """Events/s in /healthz counts from here: the holder's window."""
    events = store.stream_state(client, cluster, stream).get("events", "0")
    store.note_stream(client, cluster, stream, started=time.time(), events_at_start=events)


@shared_task(name="handoff.tasks.watch", bind=True, ignore_result=True)
def watch(self, cluster: str, resource: str) -> str:
    """List then watch one resource of a cluster for a window, under its lease."""
    from handoff.live.sources.kube import KubeSource
    from handoff.live.sources.watching import WatchLoop

    client = _redis()
    config = clusters.cluster(client, cluster)
    lease = _lease(client, cluster, resource, self.request.id)
    if config is None or not lease.acquire():
        return "skipped"
    client.delete(store.pending_key(cluster, resource))
    tuning = conf.watch_settings()
    try:
        source = KubeSource.for_cluster(config)
        sink = StreamSink(client, cluster, resource, maxlen=conf.stream_maxlen())
        _note_start(client, cluster, resource)
        # Where the stream goes: `status`, the home page and the board name it (not /healthz).
        sink.note(endpoint=source.endpoint)
        loop = WatchLoop(
            source, sink, resource, tuning, lease, reconnect=lambda: KubeSource.for_cluster(config)
        )
        with on_worker_stop(loop.stop):
            stopped = loop.run(time.monotonic() + tuning.window)
    except Exception as exc:
        # E.g. no readable kubeconfig or service account: counts as a failed call, so
        # /healthz names it after HANDOFF_STREAM_ERROR_LIMIT restarts by supervise.
        message = str(exc) if isinstance(exc, SourceError) else type(exc).__name__
        pipe = client.pipeline(transaction=False)
        store.note_stream(pipe, cluster, resource, last_error=message, error_at=time.time())
        pipe.hincrby(store.stream_key(cluster, resource), "failures", 1)
        pipe.execute()
        lease.release()
        raise
    if stopped in ("window", "stopping"):
        _hand_over(client, cluster, resource, lease)
    return stopped


# The fold worker of the last window that ended cleanly in this process, kept for its
# successor in case that lands here too (with one fold worker process per cluster, it
# always does): taking it over skips reloading the snapshot (~2.5 s at 200,000 pods, in
# which nothing is pushed). At most one is kept, so a process holds at most one cluster's
# state it no longer folds, until its next fold task.
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


@shared_task(name="handoff.tasks.fold", bind=True, ignore_result=True)
def fold(self, cluster: str) -> str:
    """Fold the cluster's stream into pod state for a window, under the fold lease."""
    client = _redis()
    lease = _lease(client, cluster, clusters.FOLD, self.request.id)
    if clusters.cluster(client, cluster) is None or not lease.acquire():
        return "skipped"
    client.delete(store.pending_key(cluster, clusters.FOLD))
    lost = threading.Event()  # the lease was lost, or the worker is stopping
    keeper = lease.keep(lost)
    publisher = Publisher(cluster)
    folder: Folder | None = None
    deadline = time.monotonic() + conf.watch_settings().window
    clean = False
    try:
        _note_start(client, cluster, clusters.FOLD)
        with on_worker_stop(lost.set):
            folder = _take_over(client, cluster, publisher)
            while not lost.is_set() and time.monotonic() < deadline:
                folded = folder.step()
                if folded:
                    pipe = client.pipeline(transaction=False)
                    pipe.hincrby(store.stream_key(cluster, clusters.FOLD), "events", folded)
                    store.note_stream(pipe, cluster, clusters.FOLD, last_event=time.time())
                    pipe.execute()
        if _stopping.is_set() or not lost.is_set():
            folder.flush()
            folder.snapshot()
            clean = not _stopping.is_set()
    except Exception as exc:
        store.note_stream(
            client, cluster, clusters.FOLD, last_error=type(exc).__name__, error_at=time.time()
        )
        raise
    finally:
        stopped = "stopping" if _stopping.is_set() else "lost" if lost.is_set() else "window"
        lost.set()
        keeper.join(timeout=5)
        publisher.close()
        if folder is not None:
            folder.close()
            if clean and stopped == "window":
                _warm[cluster] = folder
    if stopped in ("window", "stopping"):
        _hand_over(client, cluster, clusters.FOLD, lease)
    return stopped


@shared_task(name="handoff.tasks.simulate", bind=True, ignore_result=True)
def simulate(self, cluster: str) -> str:
    """Run a simulator cluster's scenario in this worker, into the cluster's stream."""
    from handoff.live.sources.simulator import run_simulation

    client = _redis()
    config = clusters.cluster(client, cluster)
    lease = _lease(client, cluster, "simulator", self.request.id)
    if config is None or not lease.acquire():
        return "skipped"
    client.delete(store.pending_key(cluster, "simulator"))
    stop = threading.Event()
    keeper = lease.keep(stop)
    sink = StreamSink(client, cluster, "simulator", track_known=False)
    _note_start(client, cluster, "simulator")
    try:
        with on_worker_stop(stop.set):
            run_simulation(sink, config, stop, speed=float(config.options.get("speed", 1.0)))
        if not stop.is_set():  # the scenario ended: nothing for supervise to restart
            store.note_stream(client, cluster, "simulator", finished=time.time())
    finally:
        stop.set()
        keeper.join(timeout=5)
    if _stopping.is_set():
        _hand_over(client, cluster, "simulator", lease)  # a fresh run on another worker
        return "stopping"
    lease.release()
    return "finished"


@shared_task(name="handoff.tasks.supervise", ignore_result=True)
def supervise() -> list[str]:
    """Start every configured stream that has no live holder (a crashed worker's lease
    lapses after HANDOFF_LEASE_TTL; beat runs this every HANDOFF_SUPERVISE_INTERVAL)."""
    client = _redis()
    started = []
    try:
        for name, config in clusters.clusters(client).items():
            for stream in config.streams():
                if stream == "simulator" and store.stream_state(client, name, stream).get(
                    "finished"
                ):
                    continue
                if client.exists(store.lease_key(name, stream)):
                    continue
                # One start in flight per stream, however many beats pass before it runs.
                pending = store.pending_key(name, stream)
                if client.set(pending, "1", nx=True, ex=conf.lease_ttl() * 3):
                    start_stream(name, stream)
                    started.append(f"{name}/{stream}")
    finally:
        client.close()
    if started:
        log.info("started streams: %s", ", ".join(started))
    return started
