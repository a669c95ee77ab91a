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

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
import redis

from handoff import queries, store
from handoff import verdicts as v
from handoff.gcpause import paused_gc
from handoff.push import Publisher, messages
from handoff.report import pod_view
from handoff.schema import LINE_DECODER, DecodeError
from handoff.timeline import DELETED, PodState, Timeline, dump_state, load_state
from handoff.trace import WatchEvent, format_time
from handoff.trace import _fast_time as observed_time  # the reader's cached parse

log = logging.getLogger(__name__)
# Verdicts that can change with nothing but the passing of time.
TIME_BASED = frozenset({v.AWAITING_KUBELET, v.STARTING})
SNAPSHOT_VERSION = 2
NODE_BLIND = "node:"  # key prefix in Folder.blind for nodes (pods are keyed by uid)


class Snapshot(msgspec.Struct):
    """What the fold worker saves: its timeline (timeline.dump_state), the blind
    deletions it knows, and the stream id both cover."""

    version: int
    timeline: bytes
    blind: dict[str, dict[str, str]]
    cursor: str


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
    retention_hours: float = 24.0  # stream age, and how long deleted pods are kept
    max_events: int = 2_000_000  # stream length cap


class Folder:
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
        self.last_sweep = clock()
        self.last_snapshot = clock()
        self.events = 0

    # ------------------------------------------------------------ restore

    def restore(self) -> None:
        """Load the snapshot, fold the stream after it, rewrite every pod's view."""
        self.load()
        # The store may hold views of pods this state no longer has (dropped, forgotten).
        stored = set(self.client.hkeys(store.pods_key(self.cluster)))
        stale = {uid.decode() for uid in stored} - set(self.timeline.pods)
        self._clear_indexes()
        self.dirty = set(self.timeline.pods)
        self.flush(removed=sorted(stale))

    def load(self) -> None:
        """The timeline as of the stream's end: the snapshot plus the entries after it."""
        raw = self.client.get(store.snapshot_key(self.cluster))
        if raw is not None:
            # Data only (MessagePack), never pickle: whoever can write to Redis must
            # not be able to run code in the worker.
            try:
                saved = msgspec.msgpack.decode(raw, type=Snapshot)
                if saved.version != SNAPSHOT_VERSION:
                    raise ValueError(f"snapshot version {saved.version}")
                self.timeline = load_state(saved.timeline)
                self.blind, self.cursor = saved.blind, saved.cursor
            except (ValueError, msgspec.DecodeError) as exc:
                log.warning(
                    "%s: snapshot unreadable (%s), folding the whole stream", self.cluster, exc
                )
        with paused_gc():
            while self.fold(self._range(self.settings.batch * 5)):
                pass

    def _clear_indexes(self) -> None:
        pattern = store.index_key(self.cluster, "*", "*")
        keys = list(self.client.scan_iter(match=pattern, count=1000))
        for start in range(0, len(keys), 500):
            self.client.delete(*keys[start : start + 500])
        self.written = {}

    def _range(self, count: int) -> list[tuple[str, bytes]]:
        start = "-" if self.cursor == "0-0" else "(" + self.cursor
        entries = self.client.xrange(store.events_key(self.cluster), min=start, count=count)
        return [(i.decode(), f[store.STREAM_FIELD]) for i, f in entries]

    # --------------------------------------------------------------- fold

    def step(self) -> int:
        """Fold what arrived (waiting up to block_ms), flush when due. Entries folded."""
        entries = self._read()
        count = self.fold(entries)
        now = self.clock()
        behind = count >= self.settings.batch
        window = self.settings.backlog_push_interval if behind else self.settings.push_interval
        if self.dirty and now - self.last_flush >= window:
            self.flush()
        if now - self.last_sweep >= self.settings.sweep_interval:
            self.sweep()
            self.retain()
        if now - self.last_snapshot >= self.settings.snapshot_interval:
            self.snapshot()
        return count

    def _read(self) -> list[tuple[str, bytes]]:
        reply = self._reader.xread(
            {store.events_key(self.cluster): self.cursor},
            count=self.settings.batch,
            block=self.settings.block_ms,
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

    def view(self, pod: PodState, now: float) -> dict[str, Any]:
        view = pod_view(self.timeline, pod, now, self.settings.stuck_after)
        blind = self.blind.get(pod.uid)
        # The deletion time of a pod that vanished while the watch was blind is only
        # bounded: after `from`, by `to` (when the relist showed it gone).
        view["deleted_blind"] = blind
        return view

    def flush(self, removed: list[str] | None = None) -> None:
        now = self.now()
        pods = self.timeline.pods
        views = {}
        for uid in self.dirty:
            pod = pods.get(uid)
            if pod is not None and not uid.startswith("name:"):
                views[uid] = (self.view(pod, now), pod.last_change)
        self.dirty = set()
        stamp = format_time(now)
        pipe = self.client.pipeline(transaction=False)
        store.write_pods(pipe, self.cluster, views, self.written)
        if removed:
            store.drop_pods(pipe, self.cluster, removed, self.written)
        progress: dict[str, Any] = {
            "cursor": self.cursor,
            "evaluated_at": stamp,
            "stuck_after": repr(self.settings.stuck_after),
            "pods": len(pods),
            "nodes": len(self.timeline.nodes),
            "events": self.events,
            "flushed": repr(self.clock()),
        }
        if self.nodes_dirty:
            # Every node, rebuilt: at 5,000 nodes too costly to redo on every flush.
            progress["nodes_json"] = orjson.dumps(self._nodes())
            self.nodes_dirty = False
        pipe.hset(store.fold_key(self.cluster), mapping=progress)
        pipe.execute()
        self.last_flush = self.clock()
        if self.publisher is not None and (views or removed):
            pushed = [view for view, _ in views.values()]
            counts = queries.counts(self.client, self.cluster)["verdicts"]
            for message in messages(self.cursor, pushed, removed or [], stamp, counts):
                self.publisher.publish(message)

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

    def sweep(self) -> None:
        """Re-judge pods whose verdict changes with time alone; write the ones that did."""
        now = self.now()
        self.last_sweep = self.clock()
        for uid, (verdict, _, _) in self.written.items():
            if verdict in TIME_BASED:
                pod = self.timeline.pods.get(uid)
                if pod is not None:
                    judged = self.timeline.judge(pod, now, self.settings.stuck_after)
                    if judged.verdict != verdict:
                        self.dirty.add(uid)
        if self.dirty:
            self.flush()

    def retain(self) -> None:
        """Forget pods deleted longer ago than the retention; trim the stream by age."""
        horizon = self.now() - self.settings.retention_hours * 3600
        gone = [
            uid
            for uid, pod in self.timeline.pods.items()
            if pod.milestones[DELETED] is not None and pod.milestones[DELETED] < horizon
        ]
        for uid in gone:
            pod = self.timeline.pods.pop(uid)
            if self.timeline.by_name.get(pod.key) == uid:
                del self.timeline.by_name[pod.key]
            self.blind.pop(uid, None)
        if gone:
            self.dirty.difference_update(gone)
            pipe = self.client.pipeline(transaction=False)
            store.drop_pods(pipe, self.cluster, gone, self.written)
            pipe.execute()
            if self.publisher is not None:
                counts = queries.counts(self.client, self.cluster)["verdicts"]
                stamp = format_time(self.now())
                for message in messages(self.cursor, [], gone, stamp, counts):
                    self.publisher.publish(message)

    def snapshot(self) -> None:
        """Save the timeline with the id it covers; only then may the stream before it go."""
        self.last_snapshot = self.clock()
        blob = msgspec.msgpack.encode(
            Snapshot(SNAPSHOT_VERSION, dump_state(self.timeline), self.blind, self.cursor)
        )
        pipe = self.client.pipeline(transaction=False)
        pipe.set(store.snapshot_key(self.cluster), blob)
        pipe.hset(store.fold_key(self.cluster), "snapshot", self.cursor)
        pipe.execute()
        self._trim()

    def _trim(self) -> None:
        """The stream keeps what is younger than the retention, at most max_events, and
        never drops an entry the snapshot does not cover."""
        age_ms = int((self.clock() - self.settings.retention_hours * 3600) * 1000)
        covered = store.stream_id_key(self.cursor)
        minid = min((age_ms, 0), covered)
        key = store.events_key(self.cluster)
        if minid > (0, 0):
            self.client.xtrim(key, minid=f"{minid[0]}-{minid[1]}", approximate=True)
        length = self.client.xlen(key)
        if length > self.settings.max_events:
            # Only entries the snapshot covers may go.
            first = self.client.xrange(key, count=length - self.settings.max_events)
            if first and store.stream_id_key(first[-1][0]) <= covered:
                self.client.xtrim(key, minid=first[-1][0], approximate=True)


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
