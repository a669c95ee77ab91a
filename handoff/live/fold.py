"""The fold worker: one per cluster, turning the cluster's Redis Stream into pod state.

It keeps an in-memory ``Timeline`` and walks the stream in order (``step``), then writes
the views of the pods that changed, with their indexes, and pushes them (``flush``, at most
every ``push_interval``). A snapshot of the timeline (with the stream id it covers) is saved
now and then, so a successor restores it and folds only the tail (``restore``). The same
worker re-judges pods whose verdict changes with time alone (``sweep``: awaiting-kubelet →
stuck) and applies retention (``retain``). The Celery task ``handoff.tasks.fold`` runs
these steps under the cluster's fold lease.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import redis

from handoff.core import verdicts as v
from handoff.core.gcpause import Tenure, paused_gc
from handoff.core.podstate import CREATED, DELETED, PodState
from handoff.core.schema import LINE_DECODER, DecodeError
from handoff.core.snapshot import load_state
from handoff.core.timeline import Timeline
from handoff.core.trace import (
    WatchEvent,
    format_time,
    observed_time,  # the reader's cached parse
)
from handoff.core.viewcodec import encode_view
from handoff.core.views import StageBar, pod_view, stage_bars
from handoff.live import queries, store
from handoff.live.aggregates import Aggregates
from handoff.live.push import Publisher, messages
from handoff.live.search import SearchIndex
from handoff.live.snapshots import Snapshot, Snapshots, read_snapshot

log = logging.getLogger(__name__)
# Verdicts that can change with nothing but the passing of time. So can any verdict of
# a pod whose deletion has been asked and not finished: past its grace period it becomes
# stuck-terminating (``terminating``).
TIME_BASED = frozenset({v.AWAITING_KUBELET, v.STARTING})
NODE_BLIND = "node:"  # key prefix in Folder.blind for nodes (pods are keyed by uid)
# Seconds between rebuilds of every node's summary (the nodes page's data) while the
# fold runs: ~7 ms at 5,000 nodes, too much for every flush when nodes keep changing.
NODES_INTERVAL = 1.0
# Pod views per MULTI/EXEC of a flush (≈ 10 µs of Redis time each): a restore that
# rewrites 200,000 views must not hold every other client of Redis up for seconds.
FLUSH_PART = 2000


@dataclass(frozen=True)
class FoldSettings:
    stuck_after: float = 60.0
    batch: int = 2000  # stream entries read per step
    block_ms: int = 50  # how long a step waits for new entries
    push_interval: float = 0.05  # coalescing window of writes and pushes
    # The window while the fold is behind (its reads come back full): a pod that changes
    # many times in a burst is judged, written and pushed once, not once per 50 ms.
    backlog_push_interval: float = 0.5
    sweep_interval: float = 5.0
    snapshot_interval: float = 60.0
    # ... or after this many events, whichever comes first: what a successor refolds
    # after a crash is bounded by events, not seconds (a busy cluster's 60 s is 120,000).
    snapshot_events: int = 20_000
    retention_hours: float = 24.0  # stream age, and how long deleted pods are kept
    max_events: int = 2_000_000  # stream length cap
    # Seconds between gcpause.Tenure settles (None: leave the collector alone). The fold
    # task sets it; a worker that folds in someone else's process (tests) does not.
    gc_settle_interval: float | None = None


class Folder(Snapshots):
    def __init__(
        self,
        client: redis.Redis,
        cluster: str,
        settings: FoldSettings = FoldSettings(),
        publisher: Publisher | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        # Its XREAD replies unparsed: redis-py would build a dict per entry (~3 µs each).
        self._reader = redis.Redis(connection_pool=client.connection_pool)
        self._reader.set_response_callback("XREAD", _unparsed)
        self._reader.set_response_callback("XRANGE", _unparsed)
        self.cluster = cluster
        self.settings = settings
        self.publisher = publisher
        self.clock = clock
        self.timeline = Timeline(cluster)
        self.blind: dict[str, dict[str, str]] = {}  # uid -> blind interval of its deletion
        self.cursor = "0-0"
        self.applied_at = clock()  # wall time of the last event folded
        self.dirty: set[str] = set()
        self.written: dict[str, tuple[str, str, str]] = {}
        self.last_flush = 0.0
        self.nodes_dirty = True  # nodes_json is rewritten only when a node may have changed
        self.nodes_written = 0.0  # clock() of the last nodes_json
        self.last_sweep = clock()
        self.last_snapshot = clock()
        self.events = 0
        self.snapshot_events_at = 0  # self.events when the last snapshot was taken
        self.behind = False  # the last read came back full
        # Pods whose written verdict can change with time alone: all a sweep looks at.
        self.timed: set[str] = set()
        # (deletion time, uid) of deleted pods, oldest first: what retention forgets.
        self.deletions: list[tuple[float, str]] = []
        interval = settings.gc_settle_interval
        self.tenure = Tenure(interval) if interval else None
        self.saver: tuple[int, str, float] | None = None  # background snapshot: pid, cursor, start
        self.aggregates = Aggregates(client, cluster)  # the fleet page's, kept as views are written
        self.search = SearchIndex(client, cluster)  # the name index free-text search reads

    # ------------------------------------------------------------ restore

    def restore(self) -> None:
        """Load the snapshot, fold the stream after it, and write only the views that are
        not already right. Flushes are atomic (MULTI/EXEC), so the store is always what
        a fold wrote up to the fold hash's cursor, after a crash of the worker or of
        Redis (restarted from its AOF or RDB) too: views flushed before that cursor stay.
        A store that is not that (no snapshot or one without ``written``, a view count
        other than the fold's) gets every view and index entry rewritten. The collector
        is paused throughout: its passes over the state being built cost more than the
        decoding itself; the fold task's ``Tenure`` then freezes what was built, so no
        collection walks it while the fold is live."""
        with paused_gc():
            self._restore()
            if self.tenure is not None:
                self.tenure.adopt()

    def _restore(self) -> None:
        saved = self._load_snapshot()
        progress = store.fold_state(self.client, self.cluster)
        if (
            saved is None
            or saved.written is None
            or not self._store_is_the_folds(progress)
            or not self._keeps_aggregates(saved.written)
        ):
            self._fold_until(None)
            self._rewrite_all()
            return
        self._resume(saved.written, saved.pending, progress["cursor"])

    def _keeps_aggregates(self, written: dict[str, tuple[str, str, str]]) -> bool:
        """Stored by a version that kept the fleet aggregates, the name index and the
        namespaces' counts (else they are counted again from every view: an upgrade)."""
        return not written or (
            self.aggregates.present()
            and self.search.present()
            and bool(self.client.exists(store.namespaces_key(self.cluster)))
        )

    def _store_is_the_folds(self, progress: dict[str, str]) -> bool:
        """The views hash holds as many views as the last flush (or retention) left."""
        stored = progress.get("stored")
        return (
            "cursor" in progress
            and stored is not None
            and self.client.hlen(store.pods_key(self.cluster)) == int(stored)
        )

    def _resume(
        self, written: dict[str, tuple[str, str, str]], pending: list[str], flushed: str
    ) -> None:
        """Continue from the snapshot as the crashed worker would have. The snapshot's
        ``written`` is right for every pod no flush touched after it; the flushes up to
        the stored cursor ``flushed`` wrote the pods pending at the snapshot, the ones
        the entries up to it changed and swept ones, so those are read back from the
        store. Only what the entries after ``flushed`` changed (or, if no flush came
        after the snapshot, what was pending at it too) is written again."""
        self.written = written
        # A flush's first parts may have written pending pods before the cursor moved.
        reread = set(pending)
        after, at = store.stream_id_key(flushed), store.stream_id_key(self.cursor)
        if after >= at:
            self._fold_until(flushed)  # already in the stored views
            reread |= self.dirty
            # At the snapshot's own cursor a flush may have come before it or after it:
            # the pending pods are written again (an unchanged view, if it came after).
            self.dirty = set(pending) if after == at else set()
        else:  # no flush after the snapshot: `written` is the store's
            self.dirty = set(pending)
        self._fold_until(None)
        timed = self._timed_among(written)
        reread |= self.dirty | timed
        for uid in reread:
            written.pop(uid, None)
        stored = store.written_fields(self.client, self.cluster, reread)
        written.update(stored)
        self.timed = (timed - reread) | self._timed_among(stored)
        self.deletions = [
            (pod.milestones[DELETED], uid)
            for uid, pod in self.timeline.pods.items()
            if pod.milestones[DELETED] is not None
        ]
        heapq.heapify(self.deletions)
        # Owner records a flush after the snapshot wrote: each is written again as now.
        self.timeline.owners.dirty.update(self._stored_owners())
        self.flush()
        # What a continuing fold's sweep and retention would have done meanwhile: time
        # and the tail's node changes move verdicts without an event of their own.
        self.sweep()
        self.retain()

    def _timed_among(self, written: dict[str, tuple[str, str, str]]) -> set[str]:
        """The pods whose written verdict can change with time alone (see ``_track``);
        one pass over every stored pod's fields in a restore, hence inlined."""
        pods, stuck = self.timeline.pods, v.STUCK_TERMINATING
        timed = set()
        for uid, fields in written.items():
            verdict = fields[0]
            if verdict in TIME_BASED:
                timed.add(uid)
            elif verdict != stuck:
                pod = pods.get(uid)
                if (
                    pod is not None
                    and pod.deletion_requested is not None
                    and pod.milestones[DELETED] is None
                ):
                    timed.add(uid)
        return timed

    def _rewrite_all(self) -> None:
        # The store may hold views of pods this state no longer has (dropped, forgotten).
        stored = set(self.client.hkeys(store.pods_key(self.cluster)))
        stale = {uid.decode() for uid in stored} - set(self.timeline.pods)
        self._clear_indexes()
        self.dirty = set(self.timeline.pods)
        self.timeline.owners.dirty.update(self._stored_owners())
        self.flush(removed=sorted(stale))

    def _stored_owners(self) -> set[str]:
        """Every owner key stored or known: a full restore rewrites (or removes) each."""
        book = self.timeline.owners
        stored = {key.decode() for key in self.client.hkeys(store.owners_key(self.cluster))}
        return stored | set(book.failures) | set(book.endings)

    def clean_at(self, cursor: str | None) -> bool:
        """The stored snapshot and the last flush both cover the stream up to ``cursor``."""
        state = store.fold_state(self.client, self.cluster)
        return cursor is not None and state.get("snapshot") == cursor == state.get("cursor")

    def load(self) -> dict[str, tuple[str, str, str]] | None:
        """The timeline as of the stream's end: the snapshot plus the entries after it.
        Returns what the stored views were written from, if the snapshot says."""
        saved = self._load_snapshot()
        self._fold_until(None)
        return None if saved is None else saved.written

    def _load_snapshot(self) -> Snapshot | None:
        """The stored snapshot, loaded into this worker; None if there is none usable."""
        raw = store.load_snapshot(self.client, self.cluster)
        if raw is None:
            return None
        try:
            with paused_gc():  # every pod's lists are new objects: no cycles, many passes
                saved = read_snapshot(raw)
                self.timeline = load_state(saved.timeline)
        except ValueError as exc:
            log.warning("%s: snapshot unreadable (%s), folding the whole stream", self.cluster, exc)
            return None
        self.blind, self.cursor = saved.blind, saved.cursor
        return saved

    def _fold_until(self, end: str | None) -> None:
        """Fold the stream after the cursor up to ``end`` (None: its end)."""
        with paused_gc():
            while self.fold(self._range(self.settings.batch * 5, end)):
                pass

    def _clear_indexes(self) -> None:
        pattern = store.index_key(self.cluster, "*", "*")
        keys = list(self.client.scan_iter(match=pattern, count=1000))
        keys.append(store.node_verdicts_key(self.cluster))  # counted from the same writes
        keys.append(store.namespaces_key(self.cluster))
        keys += self.aggregates.keys() + self.search.keys()
        self.aggregates.forget()
        self.search.forget()
        for start in range(0, len(keys), 500):
            self.client.delete(*keys[start : start + 500])
        self.written = {}

    def _range(self, count: int, end: str | None = None) -> list[tuple[str, bytes]]:
        start = store.after_cursor(self.cursor)
        key = store.events_key(self.cluster)
        # Unparsed, as ``_read``: each entry [id, [field, line]].
        entries = self._reader.xrange(key, min=start, max=end or "+", count=count)
        return [(i.decode(), fields[1]) for i, fields in entries]

    # --------------------------------------------------------------- fold

    def step(self) -> int:
        """Fold what arrived, flush when due, then the periodic work. Entries folded.

        With nothing to flush it waits on the stream up to block_ms (an entry wakes it at
        once). With changes to flush it sleeps until their flush is due, then takes what
        arrived meanwhile without waiting, so that goes out in the same flush: a blocked
        XREAD ends only on the Redis server's clock tick (every 100 ms at the default hz
        10), which would hold the flush back. While behind (the last read came back
        full) it does not sleep at all.
        """
        if self.dirty:
            if not self.behind:  # behind, it folds on until the flush is due
                self._sleep_until_flush()
            entries = self._read(block=None)
        else:
            entries = self._read(block=self.settings.block_ms)
        count = self.fold(entries)
        self.behind = count >= self.settings.batch
        now = self.clock()
        nodes_due = self.nodes_dirty and now - self.nodes_written >= NODES_INTERVAL
        owners_due = bool(self.timeline.owners.dirty)
        if (self.dirty or nodes_due or owners_due) and now - self.last_flush >= self._window():
            self.flush(nodes=nodes_due)
            if self.tenure is not None:
                self.tenure.settle()  # the pause falls in the next coalescing window
        if now - self.last_sweep >= self.settings.sweep_interval:
            self.sweep()
            self.retain()
        if self.saver is not None:
            self._reap(wait=False)
        elif self._snapshot_due(now):
            self.snapshot_in_background()
        return count

    def _snapshot_due(self, now: float) -> bool:
        settings = self.settings
        return (
            now - self.last_snapshot >= settings.snapshot_interval
            or self.events - self.snapshot_events_at >= settings.snapshot_events
        )

    def _window(self) -> float:
        if self.behind:
            return self.settings.backlog_push_interval
        return self.settings.push_interval

    def _sleep_until_flush(self) -> None:
        due = self.last_flush + self._window() - self.clock()
        if due > 0:
            time.sleep(min(due, self.settings.block_ms / 1000))

    def close(self) -> None:
        """End of the fold window: collect a background snapshot still being written, and
        give the collector back what the fold kept from it (see gcpause.Tenure)."""
        if self.saver is not None:
            self._reap(wait=True)
        if self.tenure is not None:
            self.tenure.release()

    def _read(self, block: int | None) -> list[tuple[str, bytes]]:
        reply = self._reader.xread(
            {store.events_key(self.cluster): self.cursor}, count=self.settings.batch, block=block
        )
        if not reply:
            return []
        # The raw reply (RESP3: {key: entries}; RESP2: [[key, entries]]), each entry
        # [id, [field, line]]: a stream entry has the one field.
        entries = next(iter(reply.values())) if isinstance(reply, dict) else reply[0][1]
        return [(i.decode(), fields[1]) for i, fields in entries]

    def fold(self, entries: list[tuple[str, bytes]]) -> int:
        apply, dirty = self.timeline.apply, self.dirty
        nodes_dirty = False
        for entry_id, raw in entries:
            event = _event(raw)
            if event is not None:
                pod = apply(event)
                if pod is not None:
                    dirty.add(pod.uid)
                    if b'"blind"' in raw and event.type == "DELETED":
                        self._note_blind(pod, raw)
                else:
                    nodes_dirty = True  # Node changes, and events about nodes, return None
                    if b'"blind"' in raw and event.type == "DELETED":
                        self._note_blind_node(raw)
            self.cursor = entry_id
        if nodes_dirty:
            self.nodes_dirty = True
        if self.timeline.merged:  # their views go at the next flush
            dirty.update(self.timeline.merged)
            self.timeline.merged.clear()
        if entries:
            self.applied_at = self.clock()
            self.events += len(entries)
        return len(entries)

    def _note_blind(self, pod: PodState, raw: bytes) -> None:
        blind = orjson.loads(raw).get("blind")
        if isinstance(blind, dict) and pod.uid not in self.blind:
            self.blind[pod.uid] = blind

    def _note_blind_node(self, raw: bytes) -> None:
        """A node gone while the watch was blind: its page says when it could have gone."""
        line = orjson.loads(raw)
        obj, blind = line.get("object") or {}, line.get("blind")
        name = (obj.get("metadata") or {}).get("name")
        if obj.get("kind") == "Node" and name and isinstance(blind, dict):
            self.blind.setdefault(NODE_BLIND + name, blind)

    def now(self) -> float:
        """The cluster's clock: its last observed event, moved on by the wall clock since.
        Live it is the present; for a replayed old trace it stays at the trace's time."""
        last = self.timeline.last_observed
        if last is None:
            return self.clock()
        return last + max(0.0, self.clock() - self.applied_at)

    def view(self, pod: PodState, now: float, bars: list[StageBar] | None = None) -> dict[str, Any]:
        view = pod_view(self.timeline, pod, now, self.settings.stuck_after, bars=bars)
        blind = self.blind.get(pod.uid)
        # The deletion time of a pod that vanished while the watch was blind is only
        # bounded: after `from`, by `to` (when the relist showed it gone).
        view["deleted_blind"] = blind
        return view

    def flush(self, removed: list[str] | None = None, nodes: bool = True) -> None:
        """Write the changed pods' views and the fold's progress, then push them. The
        coalescing window counts from the start of the flush, so a pod waits at most one
        window for it. ``nodes``: rebuild the nodes' summary if a node may have changed."""
        self.last_flush = self.clock()
        now = self.now()
        pods = self.timeline.pods
        views = {}
        # Each view's stage bars in epoch seconds, for its swimlane entry (aggregates).
        bars: dict[str, tuple[float | None, list[StageBar]]] = {}
        removed = list(removed or ())
        incident = None
        note_ending = self.timeline.owners.note_ending
        for uid in self.dirty:
            pod = pods.get(uid)
            if pod is not None and not uid.startswith("name:"):
                bars[uid] = (pod.milestones[CREATED], stage_bars(pod.milestones, now))
                view = self.view(pod, now, bars[uid][1])
                views[uid] = (view, encode_view(view))
                self._track(uid, view["verdict"], pod)
                if pod.owner is not None:
                    note_ending(pod, view["verdict"], view["reason"])
                if _new_incident(view["verdict"], self.written.get(uid)):
                    incident = view
            elif pod is None and uid in self.written:
                removed.append(uid)  # merged into another pod since it was written
        self.dirty = set()
        for uid in removed or ():
            self.timed.discard(uid)
        stamp = format_time(now)
        pipe = self._write_in_parts(views, removed, bars)
        if removed:
            store.drop_pods(pipe, self.cluster, removed, self.written)
        self._write_owners(pipe, now)
        progress: dict[str, Any] = {
            "cursor": self.cursor,
            "evaluated_at": stamp,
            "stuck_after": repr(self.settings.stuck_after),
            "pods": len(pods),
            "stored": len(self.written),  # views in the store after this flush
            "nodes": len(self.timeline.nodes),
            "events": self.events,
            "flushed": repr(self.clock()),
        }
        if incident is not None:
            # The board's empty state links the newest pod that came to need attention.
            progress["last_incident"] = orjson.dumps(
                {k: incident[k] for k in ("namespace", "name", "verdict")} | {"at": stamp}
            )
        if self.nodes_dirty and nodes:
            # Every node, rebuilt: at 5,000 nodes too costly to redo on every flush.
            progress["nodes_json"] = orjson.dumps(self._nodes())
            self.nodes_dirty = False
            self.nodes_written = self.clock()
        pipe.hset(store.fold_key(self.cluster), mapping=progress)
        push = self.publisher is not None and bool(views or removed)
        if push:
            queries.queue_counts(pipe, self.cluster)
        replies = pipe.execute()
        self.aggregates.settle(replies, len(self.written))
        if push:
            pushed = [view for view, _ in views.values()]
            counts = queries.read_counts(replies)["verdicts"]
            for message in messages(self.cursor, pushed, removed or [], stamp, counts):
                self.publisher.publish(message)

    def _write_owners(self, pipe: redis.client.Pipeline, now: float) -> None:
        """The records of the owners that changed (core/owners.py), one field each."""
        book = self.timeline.owners
        records = {}
        for key in book.take_dirty():
            record = book.record(key, now)
            records[key] = None if record is None else orjson.dumps(record)
        store.write_owners(pipe, self.cluster, records)

    def _write_in_parts(
        self,
        views: dict[str, tuple[dict[str, Any], bytes]],
        removed: list[str],
        bars: dict[str, tuple[float | None, list[StageBar]]],
    ) -> Any:
        """Write the views in MULTI/EXECs of at most FLUSH_PART pods; returns the last one's
        pipeline, for the flush's progress to go with them. Each part is whole, so a worker
        killed mid-flush, or Redis restarted from its AOF or RDB, never leaves half of a
        pod's writes; a part written before the cursor moved holds pods the entries after
        the stored cursor changed, which a restore reads back (see restore). One EXEC of
        every view would hold every other client of Redis up for seconds. The fleet
        aggregates' and the name index's share of each part goes in that part; the
        ``removed`` pods' in the last one, with their drop."""
        items = list(views.items())
        for start in range(0, len(items) - FLUSH_PART, FLUSH_PART):
            pipe = self.client.pipeline(transaction=True)
            self._queue_views(pipe, dict(items[start : start + FLUSH_PART]), [], bars)
            pipe.hset(store.fold_key(self.cluster), "stored", len(self.written))
            self.aggregates.settle(pipe.execute(), len(self.written))
        last = len(items) - (len(items) - 1) % FLUSH_PART - 1 if items else 0
        pipe = self.client.pipeline(transaction=True)
        self._queue_views(pipe, dict(items[last:]), removed, bars)
        return pipe

    def _queue_views(
        self,
        pipe: redis.client.Pipeline,
        views: dict[str, tuple[dict[str, Any], bytes]],
        removed: list[str],
        bars: dict[str, tuple[float | None, list[StageBar]]],
    ) -> None:
        """The views' writes with the aggregates' and the index's moves, which read what
        was written before (``self.written``, updated by ``write_pods``)."""
        self.aggregates.queue(pipe, views, removed, self.written, bars)
        self.search.queue(pipe, views, removed, self.written)
        store.write_pods(pipe, self.cluster, views, self.written)

    def _nodes(self) -> dict[str, Any]:
        return {
            name: {
                "exists": node.exists,
                "ready": node.ready,
                "deleted": format_time(node.deleted) if node.deleted else None,
                # Gone while the watch was blind: {stream, from, to}, else None.
                "deleted_blind": None if node.exists else self.blind.get(NODE_BLIND + name),
                "unschedulable": node.unschedulable,
                "taints": node.taints,
                # Readiness history for the nodes page: [from, to or None, why] per outage.
                "down": [
                    [format_time(a), format_time(b) if b else None, w] for a, b, w in node.down
                ],
            }
            for name, node in self.timeline.nodes.items()
        }

    # ------------------------------------------------------ time and size

    def _track(self, uid: str, verdict: str, pod: PodState) -> None:
        """Note what sweep and retain will look at, so neither walks every pod."""
        if verdict in TIME_BASED or (verdict != v.STUCK_TERMINATING and terminating(pod)):
            self.timed.add(uid)
        else:
            self.timed.discard(uid)
        deleted = pod.milestones[DELETED]
        if deleted is not None:
            heapq.heappush(self.deletions, (deleted, uid))

    def sweep(self) -> None:
        """Re-judge pods whose verdict changes with time alone; write the ones that did."""
        now = self.now()
        self.last_sweep = self.clock()
        for uid in self.timed:
            pod = self.timeline.pods.get(uid)
            if pod is not None:
                judged = self.timeline.judge(pod, now, self.settings.stuck_after)
                if judged.verdict != self.written.get(uid, ("", "", ""))[0]:
                    self.dirty.add(uid)
        if self.dirty:
            self.flush()

    def retain(self) -> None:
        """Forget pods deleted longer ago than the retention; trim the stream by age."""
        horizon = self.now() - self.settings.retention_hours * 3600
        due: dict[str, None] = {}  # in deletion order, each pod once
        deletions, pods = self.deletions, self.timeline.pods
        while deletions and deletions[0][0] < horizon:
            _, uid = heapq.heappop(deletions)
            pod = pods.get(uid)
            # A pod is pushed once per flush after its deletion: the first pop takes it.
            if pod is not None and uid not in due:
                deleted = pod.milestones[DELETED]
                if deleted is not None and deleted < horizon:
                    due[uid] = None
        self.timeline.owners.forget(horizon)
        gone = list(due)
        for uid in gone:
            pod = self.timeline.pods.pop(uid)
            if self.timeline.by_name.get(pod.key) == uid:
                del self.timeline.by_name[pod.key]
            self.blind.pop(uid, None)
            self.timed.discard(uid)
        if gone:
            self.dirty.difference_update(gone)
            pipe = self.client.pipeline(transaction=True)
            self.aggregates.queue(pipe, {}, gone, self.written)
            self.search.queue(pipe, {}, gone, self.written)
            store.drop_pods(pipe, self.cluster, gone, self.written)
            pipe.hset(store.fold_key(self.cluster), "stored", len(self.written))
            if self.publisher is not None:
                queries.queue_counts(pipe, self.cluster)
            replies = pipe.execute()
            self.aggregates.settle(replies, len(self.written))
            self.search.compact()
            if self.publisher is not None:
                counts = queries.read_counts(replies)["verdicts"]
                stamp = format_time(self.now())
                for message in messages(self.cursor, [], gone, stamp, counts):
                    self.publisher.publish(message)


def _new_incident(verdict: str, written: tuple[str, str, str] | None) -> bool:
    """Whether a pod has just come to need attention (or to another such verdict)."""
    return v.VERDICTS[verdict].attention and (written is None or written[0] != verdict)


def _unparsed(response: Any, **_: Any) -> Any:
    return response


def _event(raw: bytes) -> WatchEvent | None:
    """A stream entry as a watch event; None for what the fold cannot use."""
    try:
        line = LINE_DECODER.decode(raw)
    except DecodeError:
        return None
    if line.object is None or line.type is None or line.observed is None:
        return None
    at = observed_time(line.observed)
    if at is None:
        return None
    return WatchEvent(line.observed, line.type, line.object, line.cluster, 0, at, raw)


def terminating(pod: PodState | None) -> bool:
    """A deletion asked and not finished: the verdict turns stuck-terminating with time."""
    return (
        pod is not None and pod.deletion_requested is not None and pod.milestones[DELETED] is None
    )
