"""Offline triage of a large trace in several processes: the same report, sooner.

Each worker (a forked process) reads the whole file, folds the lines about its share of
the pods (``routing.Share``: by pod name, read from the line's bytes, so the other
lines are never decoded) and every line about no pod (nodes, workloads' Events, the
header, bad lines), then judges its pods, sends that judging, and makes their views (into
a spool file, ``viewspool``) or table rows. The parent merges what only the whole fold
knows — the evaluation time, the owners (their failures, the Deployments behind
ReplicaSets, how their pods ended) in the order the one-process fold met them, the
counts and durations, the rank order — while the workers make views, and writes the
report with the pods in its rank order once they are done. The output is the
one-process path's, byte for byte.

Lines every worker folds are counted once: in every worker but the first, what they add
to the counts (events applied, skipped kinds, watch errors, bad lines) is set aside.
A worker's failure fails the whole triage before anything is written.

The parallel run trades CPU for wall time: every worker reads the file and folds the
shared lines, so the CPU of all processes together is more than one process uses.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from itertools import chain
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

import orjson

from handoff.core.durations import new_samples, summarise
from handoff.core.gcpause import paused_gc
from handoff.core.owners import OwnerBook, OwnerData
from handoff.core.podstate import PodState
from handoff.core.report import (
    Tally,
    evaluation_time,
    json_frame,
    judge_pods,
    report_head,
    with_pods,
)
from handoff.core.timeline import Timeline
from handoff.core.trace import GZIP_MAGIC, READ_BUFFER, TraceReader
from handoff.core.views import pod_view, row_view
from handoff.interop.importers import open_events
from handoff.offline.routing import Share
from handoff.offline.viewspool import new_spool, spool_views, write_in_order

# Below this size a trace is folded in one process: the workers' start and their reads
# of the whole file would cost more than they save.
MIN_BYTES = 32 << 20
MAX_WORKERS = 8
LOADAVG = Path("/proc/loadavg")
BUSY_SAMPLES = 20
BUSY_GAP = 0.001


class FanOutError(Exception):
    """A worker of a parallel triage failed; nothing was written."""


def workers_for(path: str | Path, requested: int | None = None) -> int:
    """How many processes triage ``path``: ``requested`` if given (1: one process), else
    one per idle core (``idle_cores``, at most ``MAX_WORKERS``) for an uncompressed trace
    v1 file of at least ``MIN_BYTES``. Other inputs (gzip, kubectl output, watch
    streams, audit logs) are always folded in one process."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as stream:
            gzipped = stream.read(2) == GZIP_MAGIC
    except OSError:
        return 1
    if gzipped or not isinstance(open_events(path), TraceReader):
        return 1
    if requested is not None:
        return max(1, requested)
    if size < MIN_BYTES:
        return 1
    return max(1, min(idle_cores(), MAX_WORKERS))


def idle_cores() -> int:
    """The usable cores that other processes leave idle now: the threads running or ready
    on the machine (``busy_now``) taken off, rounded; the 1-minute load average where the
    kernel does not tell. The workers use ≈ 25 % more CPU than one process: on cores that
    are busy already they only slow each other and the neighbours down, and one process is
    sooner. The load average is not used where the count is known: it still holds work
    that has ended (an operator's previous triage keeps it near 1 for a minute)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    busy = busy_now()
    if busy is None:
        try:
            busy = os.getloadavg()[0]
        except OSError:
            busy = 0.0
    return max(1, min(cores, round(cores - busy)))


def busy_now(samples: int = BUSY_SAMPLES, gap: float = BUSY_GAP) -> float | None:
    """Threads running or ready on the whole machine, this process left out: the mean of
    ``samples`` readings of ``/proc/loadavg``'s fourth field, ``gap`` seconds apart (a
    neighbour bound to the CPU is in every reading; ≈ 20 ms in all). None where the file
    is not there or not as Linux writes it."""
    counts = []
    for taken in range(samples):
        try:
            counts.append(int(LOADAVG.read_bytes().split()[3].split(b"/")[0]) - 1)
        except (OSError, IndexError, ValueError):
            return None
        if taken + 1 < samples:
            time.sleep(gap)
    return max(0.0, sum(counts) / len(counts))


class FanOut:
    """A parallel triage under way: ``timeline`` and ``reader`` hold what the command
    reports before the pods (events applied, bad lines, skipped kinds); ``write_json``
    or ``report_rows`` then finish it. Workers judge while the parent reports."""

    def __init__(
        self,
        path: str | Path,
        workers: int,
        at: float | None,
        stuck_after: float,
        only: list[str],
        form: str,
    ) -> None:
        self.path = str(path)
        self.stuck_after = stuck_after
        self.form = form
        # Unnamed files the workers write their views to (the parent writes them out).
        self.spools = [new_spool() for _ in range(workers)] if form == "json" else []
        self.conns: list[Connection] = []
        self.procs: list[Any] = []
        context = multiprocessing.get_context("fork")
        job = (self.path, workers, at, stuck_after, only, form)
        try:
            for index in range(workers):
                mine, theirs = context.Pipe()
                spool = self.spools[index] if self.spools else None
                proc = context.Process(target=_work, args=(index, job, theirs, spool), daemon=True)
                self.conns.append(mine)
                self.procs.append(proc)
                try:
                    proc.start()
                except OSError as exc:
                    self.procs.pop()
                    raise FanOutError(f"cannot start triage worker {index + 1}: {exc}") from exc
                theirs.close()
            folded = [self._receive(index) for index in range(workers)]
            self.timeline, self.reader, self.owners = _merge_folds(self.path, folded)
            self.now = evaluation_time(self.timeline, at)
            for conn in self.conns:
                conn.send((self.now, self.owners.deployments))
        except BaseException:
            self.close()
            raise

    def _receive(self, index: int) -> dict[str, Any]:
        try:
            message = self.conns[index].recv()
        except (EOFError, OSError):
            self.procs[index].join(5)
            code = self.procs[index].exitcode
            raise FanOutError(
                f"triage worker {index + 1} of {len(self.procs)} ended without a result"
                f" (exit code {code})"
            ) from None
        if "failed" in message:
            raise FanOutError(
                f"triage worker {index + 1} of {len(self.procs)} failed: {message['failed']}"
            )
        return message

    def _judged(self) -> tuple[dict[str, Any], list[int]]:
        """The report's header from every worker's judging, and the report's order of
        their pods (``_rank_order``). Workers send their judging before they make their
        views or rows, so this is done while they make them."""
        parts = self._receive_all()
        counts: Counter[str] = Counter()
        samples = new_samples()
        unobserved: Counter[str] = Counter()
        endings: list[tuple[int, PodEnding, str, str | None]] = []
        for part in parts:
            counts.update(part["counts"])
            for name, values in part["samples"].items():
                samples[name].extend(values)
            unobserved.update(part["unobserved"])
            endings.extend(part["endings"])
        # How owned pods ended, noted in the one-process fold's order of its pods.
        endings.sort(key=lambda ending: ending[0])
        for _born, pod, verdict, reason in endings:
            self.owners.note_ending(pod, verdict, reason)  # type: ignore[arg-type]
        durations = summarise(samples, dict(unobserved))
        head = report_head(
            self.timeline,
            self.now,
            self.stuck_after,
            counts,
            durations,
            self.owners,
            self.reader.errors,
        )
        return head, _rank_order([part["keys"] for part in parts])

    def _receive_all(self) -> list[dict[str, Any]]:
        try:
            return [self._receive(index) for index in range(len(self.procs))]
        except BaseException:
            self.close()
            raise

    def write_json(self, out: IO[bytes]) -> None:
        """The streamed triage JSON (``report.write_report_json``'s bytes)."""
        head, order = self._judged()
        try:
            sizes = [part["sizes"] for part in self._receive_all()]
            opening, closing = json_frame(head)
            write_in_order(out, opening, self.spools, sizes, order, closing)
        finally:
            self.close()

    def report_rows(self) -> dict[str, Any]:
        """``report.build_rows``'s report, for the table."""
        head, order = self._judged()
        rows = list(chain.from_iterable(part["rows"] for part in self._receive_all()))
        self.close()
        return with_pods(head, [rows[index] for index in order])

    def close(self) -> None:
        """Stop the workers (finished ones are gone already) and drop the spools."""
        for conn in self.conns:
            conn.close()
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        for spool in self.spools:
            spool.close()


def _rank_order(keys: list[list[tuple[Any, ...]]]) -> list[int]:
    """Every worker's pods (their rank keys, each worker's in its rank order) in the
    report's order (worst first, then oldest; the uid in the key makes it total), as
    indexes into all of them laid end to end. A sort that finds each worker's keys
    already in order merges them, comparing keys in C."""
    every = list(chain.from_iterable(keys))
    return sorted(range(len(every)), key=every.__getitem__)


class PodEnding:
    """What ``OwnerBook.note_ending`` reads of a pod, sent from a worker to the parent."""

    __slots__ = ("last_change", "milestones", "name", "namespace", "owner", "uid")

    def __init__(self, pod: PodState) -> None:
        self.namespace = pod.namespace
        self.owner = pod.owner
        self.uid = pod.uid
        self.name = pod.name
        self.milestones = pod.milestones
        self.last_change = pod.last_change

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, slot) for slot in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for slot, value in zip(self.__slots__, state, strict=True):
            setattr(self, slot, value)


class _OwnerOf:
    """What ``OwnerBook.note_pod`` reads of a pod."""

    __slots__ = ("namespace", "owner")

    def __init__(self, namespace: str, owner: tuple[str, str] | None) -> None:
        self.namespace = namespace
        self.owner = owner


class _RecordingBook(OwnerBook):
    """A worker's owners, also recording each call with the line that made it, for the
    parent to replay all workers' calls in the file's order."""

    def __init__(self, keep_events: bool) -> None:
        super().__init__()
        self.line = 0
        self.keep_events = keep_events
        self.calls: list[tuple[Any, ...]] = []

    def apply_event(self, observed: float, facts: Any) -> None:
        if self.keep_events:
            self.calls.append((self.line, observed, facts))
        super().apply_event(observed, facts)

    def note_pod(self, pod: PodState, template_hash: str, created: float | None) -> None:
        self.calls.append((self.line, None, (pod.namespace, pod.owner, template_hash, created)))
        super().note_pod(pod, template_hash, created)


class _BornPods(dict[str, PodState]):
    """A worker's pods, remembering the line that put each in place: the one-process
    fold's order of its pods (a dict's) is the order of those lines."""

    def __init__(self, book: _RecordingBook) -> None:
        super().__init__()
        self.book = book
        self.born: dict[str, int] = {}

    def __setitem__(self, key: str, value: PodState) -> None:
        if key not in self:
            self.born[key] = self.book.line
        super().__setitem__(key, value)


def _work(index: int, job: tuple[Any, ...], conn: Connection, spool: IO[bytes] | None) -> None:
    """One worker, start to end; it reports a failure rather than raising it."""
    gc.disable()  # a short-lived process: its fold and views make no cycles to collect
    try:
        path, workers, at, stuck_after, only, form = job
        timeline, reader, book, lines = _fold_share(path, index, workers, at)
        conn.send(_fold_result(index, timeline, reader, book, lines))
        now, deployments = conn.recv()
        tally, judged = _judge_share(timeline, now, stuck_after, only, deployments)
        conn.send(judged)
        conn.send(_make_share(timeline, tally, now, stuck_after, form, spool))
    except BaseException as exc:  # sent to the parent, which raises it
        with contextlib.suppress(OSError):
            conn.send({"failed": f"{exc!r}\n{traceback.format_exc()}"})
    finally:
        conn.close()
        os._exit(0)  # nothing to free: the parent has what it needs


def _fold_share(
    path: str, index: int, workers: int, until: float | None
) -> tuple[Timeline, TraceReader, _RecordingBook, list[int]]:
    """Fold this worker's lines (``fold_file``'s fold of them)."""
    book = _RecordingBook(keep_events=index == 0)
    timeline = Timeline()
    timeline.pods = _BornPods(book)
    timeline.owners = book
    reader = TraceReader(path)
    apply = timeline.apply_object

    def apply_until(observed: float, type_: str, obj: Any) -> None:
        if observed <= until:  # type: ignore[operator]
            apply(observed, type_, obj)

    lines: list[int] = []
    with paused_gc():
        share = _share(path, index, workers, timeline, reader, book, lines)
        reader.feed_numbered(share, apply if until is None else apply_until)
    timeline.cluster = reader.header.cluster if reader.header else None
    timeline.skipped.update(reader.skipped)
    return timeline, reader, book, lines


def _share(
    path: str,
    index: int,
    workers: int,
    timeline: Timeline,
    reader: TraceReader,
    book: _RecordingBook,
    lines: list[int],
) -> Iterator[tuple[int, bytes]]:
    """This worker's lines, numbered as in the file; in every worker but the first, what
    a shared line adds to the counts is put aside once the fold is done with it."""
    with open(path, "rb", buffering=READ_BUFFER) as stream:
        share = Share(stream, index, workers)
        for number, raw, shared in share:
            book.line = number
            if not shared or index == 0:
                yield number, raw
                continue
            counted = (
                timeline.events_applied,
                timeline.skipped,
                timeline.watch_errors,
                reader.errors,
                reader.skipped,
            )
            timeline.skipped, timeline.watch_errors = Counter(), []
            reader.errors, reader.skipped = [], Counter()
            yield number, raw
            (
                timeline.events_applied,
                timeline.skipped,
                timeline.watch_errors,
                reader.errors,
                reader.skipped,
            ) = counted
    lines.append(share.lines)


def _fold_result(
    index: int, timeline: Timeline, reader: TraceReader, book: _RecordingBook, lines: list[int]
) -> dict[str, Any]:
    """What the parent needs of a worker's fold."""
    first = index == 0
    return {
        "events_applied": timeline.events_applied,
        "last_observed": timeline.last_observed,
        "skipped": timeline.skipped,
        "watch_errors": timeline.watch_errors,
        "errors": reader.errors,
        "owner_calls": book.calls,
        "lines": lines[0] if lines else reader.lines_read,
        # The same in every worker (all fold the shared lines): sent by the first.
        "cluster": timeline.cluster if first else None,
        "header": reader.header if first else None,
        "nodes": timeline.nodes if first else None,
        "nodes_known": timeline.nodes_known,
    }


def _merge_folds(
    path: str, folded: list[dict[str, Any]]
) -> tuple[Timeline, TraceReader, OwnerBook]:
    """The one-process fold's counts, bad lines and owners, from every worker's."""
    first = folded[0]
    timeline = Timeline(first["cluster"])
    timeline.nodes = first["nodes"]
    timeline.nodes_known = first["nodes_known"]
    reader = TraceReader(path)
    reader.header = first["header"]
    reader.lines_read = first["lines"]
    calls: list[tuple[Any, ...]] = []
    for part in folded:
        timeline.events_applied += part["events_applied"]
        if part["last_observed"] is not None and (
            timeline.last_observed is None or part["last_observed"] > timeline.last_observed
        ):
            timeline.last_observed = part["last_observed"]
        timeline.skipped.update(part["skipped"])
        timeline.watch_errors.extend(part["watch_errors"])
        reader.errors.extend(part["errors"])
        calls.extend(part["owner_calls"])
    reader.errors.sort(key=lambda error: error.line)
    # The owners as the one-process fold left them: every call in the file's order.
    owners = OwnerBook()
    calls.sort(key=lambda call: call[0])
    for _line, observed, what in calls:
        if observed is None:
            namespace, owner, template_hash, created = what
            owners.note_pod(_OwnerOf(namespace, owner), template_hash, created)  # type: ignore[arg-type]
        else:
            owners.apply_event(observed, what)
    # The report judges against its own copy (``report._ranked``).
    return timeline, reader, OwnerBook(owners.data())


def _judge_share(
    timeline: Timeline,
    now: float,
    stuck_after: float,
    only: list[str],
    deployments: dict[str, str],
) -> tuple[Tally, dict[str, Any]]:
    """Judge this worker's pods: the tally, and what the parent needs of it."""
    # Views name a pod's Deployment from what every worker's pods taught.
    timeline.owners = OwnerBook(OwnerData(deployments=deployments))
    born = timeline.pods.born  # type: ignore[attr-defined]
    endings: list[tuple[int, PodEnding, str, str | None]] = []

    def note_ending(pod: PodState, verdict: str, reason: str | None) -> None:
        endings.append((born[pod.uid], PodEnding(pod), verdict, reason))

    tally = judge_pods(timeline, now, stuck_after, only, note_ending)
    return tally, {
        "counts": tally.counts,
        "samples": tally.samples,
        "unobserved": tally.unobserved,
        "endings": endings,
        "keys": [item[:5] for item in tally.ranked],
    }


def _make_share(
    timeline: Timeline,
    tally: Tally,
    now: float,
    stuck_after: float,
    form: str,
    spool: IO[bytes] | None,
) -> dict[str, Any]:
    """The views of this worker's judged pods (into ``spool``, their sizes sent) or
    their table rows, in its rank order."""
    ranked = tally.ranked
    with paused_gc():
        if form == "json":
            assert spool is not None
            dumps = orjson.dumps
            views = (dumps(pod_view(timeline, i[5], now, stuck_after, i[6])) for i in ranked)
            return {"sizes": spool_views(spool, views)}
        return {"rows": [row_view(timeline, item[5], item[6]) for item in ranked]}
