"""Restore after a crash (issue 19): a fold worker killed between snapshots, and the time
its successor takes to be live again, against the rewrite of every view it replaced.

The store is built by the real fold: the trace's head folded and snapshotted (the
periodic snapshot), then ``flushed_after`` more events folded and flushed (what the
worker did after its snapshot), then it stops without a word (a SIGKILL leaves exactly
this: flushes are MULTI/EXEC) and ``arrived`` more events reach the stream (what came
in after its last flush and while no worker held the lease). The successor's restore
then runs as the fold task runs it: ``Folder(...).restore()``, after which it is live
(folding the stream's end, everything written and pushed).

``flushed_after`` follows the fold's snapshot cadence (``FoldSettings.snapshot_events``):
a crash just before the next snapshot is saved. The same store is also restored from an
earlier snapshot, ``earlier`` events before the last flush (the 60 s interval alone at
2,000 events/s, the cadence before snapshots were also taken by events), for the figure
of that scenario.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import redis

from devtools.bench.results import Figure, Results
from devtools.bench.services import Services
from handoff.core.trace import TraceReader
from handoff.live import store
from handoff.live.fold import Folder, FoldSettings

CLUSTER = "restore"


def _append(client: redis.Redis, lines: Iterator[bytes], count: int | None) -> int:
    sent = 0
    while True:
        batch = list(islice(lines, 10_000 if count is None else min(10_000, count - sent)))
        if not batch:
            return sent
        pipe = client.pipeline(transaction=False)
        store.append(pipe, CLUSTER, batch)
        pipe.execute()
        sent += len(batch)


def _fold_all(folder: Folder) -> None:
    while folder.step():
        pass
    folder.flush()


# The bench's worker snapshots only when told: a periodic one must not move the crash.
BUILDER = FoldSettings(block_ms=1, snapshot_interval=float("inf"), snapshot_events=2**62)
# The successor leaves the collector to gcpause.Tenure, as the fold task's does.
SUCCESSOR = FoldSettings(block_ms=1, gc_settle_interval=1.0)


def build_crashed_store(
    client: redis.Redis,
    trace: Path,
    total: int,
    flushed_after: int,
    arrived: int,
    earlier: int | None = None,
) -> tuple[dict[str, str], bytes | None]:
    """The store a fold worker killed after its last flush leaves; returns the fold hash
    cursor of the last flush (put back before each timed restore) and, if ``earlier``,
    the snapshot it had taken ``earlier`` events before that flush."""
    client.flushall()
    lines = (event.raw for event in TraceReader(trace) if event.raw is not None)
    head = max(earlier or 0, flushed_after)
    _append(client, lines, total - head - arrived)
    worker = Folder(client, CLUSTER, BUILDER)
    _fold_all(worker)
    old = None
    if earlier is not None and earlier > flushed_after:
        worker.snapshot()
        old = store.load_snapshot(client, CLUSTER)
        _append(client, lines, earlier - flushed_after)
        _fold_all(worker)
    worker.snapshot()
    _append(client, lines, flushed_after)
    _fold_all(worker)
    _append(client, lines, None)  # the killed worker never folds these
    return {"cursor": store.fold_state(client, CLUSTER)["cursor"]}, old


PHASES = ("_load_snapshot", "_fold_until", "flush", "sweep", "retain")


def _timed_phases(folder: Folder, spent: dict[str, float]) -> None:
    """Note the seconds each phase of the restore takes, into ``spent``."""
    for name in PHASES:
        method = getattr(folder, name)

        def timed(*args, _method=method, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - started

        setattr(folder, name, timed)


def _put_snapshot(client: redis.Redis, blob: bytes) -> None:
    """Store ``blob`` as the snapshot, its cursor left as it is (a put-back, not a save)."""
    key = store.snapshot_key(CLUSTER)
    client.delete(key)
    client.rpush(key, *store.snapshot_pieces(blob))


def _restore(
    client: redis.Redis, crashed: dict[str, str], full: bool, snapshot: bytes | None = None
) -> tuple[float, float, int, dict[str, float]]:
    """Seconds of one successor's restore, its CPU seconds (this process's: Redis's own
    are not in it), the views it wrote, and its phases' seconds (a flush inside the sweep
    counts in both). On a shared machine the CPU seconds are the steadier figure.
    ``full``: the rewrite of every view (what every crash cost before; still the path for
    a store that is not the fold's). ``snapshot``: restore from this one (put in the store
    first) instead."""
    # The crashed worker's last flush again. A round before wrote the views of the pods
    # the stream's end added, so the count is the store's: the same work each round.
    stored = client.hlen(store.pods_key(CLUSTER))
    client.hset(store.fold_key(CLUSTER), mapping={**crashed, "stored": stored})
    if full:
        client.hdel(store.fold_key(CLUSTER), "stored")
    kept = None
    if snapshot is not None:
        kept = store.load_snapshot(client, CLUSTER)
        _put_snapshot(client, snapshot)
    written = [0]
    real = store.write_pods

    def counting(pipe, cluster, views, previous):  # type: ignore[no-untyped-def]
        written[0] += len(views)
        return real(pipe, cluster, views, previous)

    store.write_pods = counting  # type: ignore[assignment]
    spent: dict[str, float] = {}
    try:
        started, cpu = time.perf_counter(), time.process_time()
        folder = Folder(client, CLUSTER, SUCCESSOR)
        _timed_phases(folder, spent)
        folder.restore()
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        folder.close()  # the end of its window: the collector gets back what it froze
    finally:
        store.write_pods = real  # type: ignore[assignment]
        if kept is not None:
            _put_snapshot(client, kept)
    return seconds, cpu, written[0], spent


def run_restore_benchmarks(
    results: Results,
    services: Services,
    trace: Path,
    total: int,
    flushed_after: int,
    arrived: int,
    earlier: int,
    rounds: int = 2,
) -> None:
    client = redis.Redis.from_url(services.redis_url())
    crashed, old_snapshot = build_crashed_store(
        client, trace, total, flushed_after, arrived, earlier
    )
    pods = int(client.hlen(store.pods_key(CLUSTER)))
    fast: list[float] = []
    late: list[float] = []
    full: list[float] = []
    cpu: dict[str, list[float]] = {"fast": [], "late": [], "full": []}
    wrote = {}
    phases: dict[str, float] = {}
    for _ in range(rounds):  # alternated, so all three see the same machine
        seconds, spent, wrote["fast"], phases = _restore(client, crashed, full=False)
        fast.append(seconds)
        cpu["fast"].append(spent)
        seconds, spent, wrote["late"], _ = _restore(client, crashed, False, old_snapshot)
        late.append(seconds)
        cpu["late"].append(spent)
        seconds, spent, wrote["full"], _ = _restore(client, crashed, full=True)
        full.append(seconds)
        cpu["full"].append(spent)
    load = os.getloadavg()[0]
    snapshot = int(client.memory_usage(store.snapshot_key(CLUSTER), samples=0) or 0)
    client.close()
    split = ", ".join(f"{name.strip('_')} {spent:.2f}" for name, spent in phases.items())
    new, old = statistics.median(fast), statistics.median(full)
    runs = f"{', '.join(f'{s:.2f}' for s in fast)} vs {', '.join(f'{s:.2f}' for s in full)}"
    cpus = {name: statistics.median(spent) for name, spent in cpu.items()}
    results.add(
        Figure(
            "restore after a crash: back to live",
            round(new, 2),
            "s",
            "rewrite every view (before)",
            round(old, 2),
            round(old / new, 1),
            "≤ 5 s at 200,000 pods",
            new <= 5.0 and pods >= 200_000,
            f"{pods} pods stored; {flushed_after} events folded and flushed after the "
            f"snapshot (the snapshot cadence), {arrived} arrived after the last flush; wrote "
            f"{wrote['fast']} views (before: {wrote['full']}); medians of {rounds}, "
            f"alternated: {runs}; CPU s (median): {cpus['fast']:.2f} vs {cpus['full']:.2f}; "
            f"last restore's phases (s): {split}; snapshot {snapshot / 1e6:.0f} MB; "
            f"load average {load:.1f}",
        )
    )
    if old_snapshot is not None:
        results.add(
            Figure(
                "restore after a crash, snapshot 60 s old (2,000 events/s)",
                round(statistics.median(late), 2),
                "s",
                "rewrite every view (before)",
                round(old, 2),
                round(old / statistics.median(late), 1),
                note=f"the same store restored from a snapshot {earlier} events before the "
                f"last flush (+ {arrived} after it); wrote {wrote['late']} views; medians of "
                f"{rounds}, alternated with the above: {', '.join(f'{s:.2f}' for s in late)}; "
                f"CPU s (median): {cpus['late']:.2f}",
            )
        )
