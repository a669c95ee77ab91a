"""Restore after a crash (issue 19): a fold worker killed between snapshots, and the time
its successor takes to be live again, against the rewrite of every view it replaced.

The store is built by the real fold: the trace's head folded and snapshotted (the
periodic snapshot), then ``flushed_after`` more events folded and flushed (what the
worker did after its snapshot), then it stops without a word (a SIGKILL leaves exactly
this: flushes are MULTI/EXEC) and ``arrived`` more events reach the stream (what came
in after its last flush and while no worker held the lease). The successor's restore
then runs as the fold task runs it: ``Folder(...).restore()``, after which it is live
(folding the stream's end, everything written and pushed).
"""

from __future__ import annotations

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


def build_crashed_store(
    client: redis.Redis, trace: Path, total: int, flushed_after: int, arrived: int
) -> dict[str, str]:
    """The store a fold worker killed after its last flush leaves; returns the fold hash
    cursor of the last flush (put back before each timed restore)."""
    client.flushall()
    lines = (event.raw for event in TraceReader(trace) if event.raw is not None)
    _append(client, lines, total - flushed_after - arrived)
    worker = Folder(client, CLUSTER, FoldSettings(block_ms=1))
    _fold_all(worker)
    worker.snapshot()
    _append(client, lines, flushed_after)
    _fold_all(worker)
    _append(client, lines, None)  # the killed worker never folds these
    return {"cursor": store.fold_state(client, CLUSTER)["cursor"]}


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


def _restore(
    client: redis.Redis, crashed: dict[str, str], full: bool
) -> tuple[float, int, dict[str, float]]:
    """Seconds of one successor's restore, the views it wrote, and its phases' seconds
    (a flush inside the sweep counts in both). ``full``: the rewrite of every view (what
    every crash cost before; still the path for a store that is not the fold's)."""
    # The crashed worker's last flush again. A round before wrote the views of the pods
    # the stream's end added, so the count is the store's: the same work each round.
    stored = client.hlen(store.pods_key(CLUSTER))
    client.hset(store.fold_key(CLUSTER), mapping={**crashed, "stored": stored})
    if full:
        client.hdel(store.fold_key(CLUSTER), "stored")
    written = [0]
    real = store.write_pods

    def counting(pipe, cluster, views, previous):  # type: ignore[no-untyped-def]
        written[0] += len(views)
        return real(pipe, cluster, views, previous)

    store.write_pods = counting  # type: ignore[assignment]
    spent: dict[str, float] = {}
    try:
        started = time.perf_counter()
        folder = Folder(client, CLUSTER, FoldSettings(block_ms=1))
        _timed_phases(folder, spent)
        folder.restore()
        seconds = time.perf_counter() - started
    finally:
        store.write_pods = real  # type: ignore[assignment]
    return seconds, written[0], spent


def run_restore_benchmarks(
    results: Results,
    services: Services,
    trace: Path,
    total: int,
    flushed_after: int,
    arrived: int,
    rounds: int = 2,
) -> None:
    client = redis.Redis.from_url(services.redis_url())
    crashed = build_crashed_store(client, trace, total, flushed_after, arrived)
    pods = int(client.hlen(store.pods_key(CLUSTER)))
    fast: list[float] = []
    full: list[float] = []
    wrote = {}
    phases: dict[str, float] = {}
    for _ in range(rounds):  # alternated, so both see the same machine
        seconds, wrote[False], phases = _restore(client, crashed, full=False)
        fast.append(seconds)
        seconds, wrote[True], _ = _restore(client, crashed, full=True)
        full.append(seconds)
    snapshot = int(client.memory_usage(store.snapshot_key(CLUSTER), samples=0) or 0)
    client.close()
    split = ", ".join(f"{name.strip('_')} {spent:.2f}" for name, spent in phases.items())
    new, old = statistics.median(fast), statistics.median(full)
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
            f"snapshot, {arrived} arrived after the last flush; wrote {wrote[False]} views "
            f"(before: {wrote[True]}); medians of {rounds}, alternated: "
            f"{', '.join(f'{s:.2f}' for s in fast)} vs {', '.join(f'{s:.2f}' for s in full)}; "
            f"last restore's phases (s): {split}; snapshot {snapshot / 1e6:.0f} MB",
        )
    )
