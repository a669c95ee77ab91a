"""Into the cluster's Redis Stream: scrub, stamp with the receive time, append, checkpoint.

One ``StreamSink`` per (cluster, stream). Each write is one pipeline holding the XADDs, the
watch's record of which objects exist (for reconciling after a 410), the checkpointed
resourceVersion and the stream's counters, so a crash between them cannot checkpoint past
an event that was not stored: at worst an event is stored twice, which the fold ignores.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import orjson
import redis

from handoff.core.redact import scrub
from handoff.core.trace import format_time
from handoff.live import store

Clock = Any  # a callable returning epoch seconds (time.time, or a test's fake)


class StreamSink:
    """The ``base.Sink`` of one (cluster, stream): the cluster's Redis Stream and keys."""

    Unavailable = redis.RedisError

    def __init__(
        self,
        client: redis.Redis,
        cluster: str,
        stream: str,
        *,
        maxlen: int | None = None,
        track_known: bool = True,
        clock: Clock = time.time,
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.stream = stream
        self.maxlen = maxlen
        self.track_known = track_known
        self.clock = clock
        self.written = 0

    def write(
        self,
        events: Iterable[tuple[str, dict[str, Any]]],
        resource_version: str | None = None,
        observed: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Append watch events (type, object) as trace lines; checkpoint the version."""
        pipe = self.client.pipeline(transaction=False)
        at = self.clock() if observed is None else observed
        stamp = format_time(at)
        count = 0
        key = store.events_key(self.cluster)
        for type_, obj in events:
            record: dict[str, Any] = {"observed": stamp, "type": type_, "object": scrub(obj)}
            if extra:
                record.update(extra)
            pipe.xadd(
                key,
                {store.STREAM_FIELD: orjson.dumps(record)},
                maxlen=self.maxlen,
                approximate=True,
            )
            if self.track_known and type_ in ("ADDED", "MODIFIED", "DELETED"):
                store.remember(pipe, self.cluster, self.stream, type_, obj)
            count += 1
        self._progress(pipe, count, at, resource_version)
        pipe.execute()
        self.written += count
        return count

    def checkpoint(self, resource_version: str) -> None:
        """A BOOKMARK: nothing to store, but the version moves on."""
        store.note_stream(
            self.client, self.cluster, self.stream, rv=resource_version, seen=self.clock()
        )

    def heard(self) -> None:
        """The API server answered (a watch request that ended normally): not silent."""
        store.note_stream(self.client, self.cluster, self.stream, seen=self.clock())

    def _progress(self, pipe: Any, count: int, at: float, resource_version: str | None) -> None:
        values: dict[str, Any] = {"seen": at}
        if resource_version:
            values["rv"] = resource_version
        if count:
            values["last_event"] = at
            pipe.hincrby(store.stream_key(self.cluster, self.stream), "events", count)
        store.note_stream(pipe, self.cluster, self.stream, **values)

    def error(self, message: str, failures: int = 1) -> None:
        """A failed call; ``failures`` in a row so far (/healthz turns red past a limit)."""
        store.note_stream(
            self.client,
            self.cluster,
            self.stream,
            last_error=message,
            error_at=self.clock(),
            failures=failures,
        )

    def recovered(self) -> None:
        """A call succeeded after failures: the run of errors is over."""
        store.note_stream(self.client, self.cluster, self.stream, failures=0)

    # ----------------------------------------------- the watch's own records

    def state(self) -> dict[str, str]:
        return store.stream_state(self.client, self.cluster, self.stream)

    def note(self, **values: Any) -> None:
        store.note_stream(self.client, self.cluster, self.stream, **values)

    def known(self) -> dict[str, list[str]]:
        return store.known(self.client, self.cluster, self.stream)

    def forget_known(self) -> None:
        self.client.delete(store.known_key(self.cluster, self.stream))

    def forget_version(self) -> None:
        self.client.hdel(store.stream_key(self.cluster, self.stream), "rv")

    def blind(self, since: float, now: float) -> dict[str, str]:
        """Note that the stream was not watched from ``since`` to ``now``: the pages show
        the interval (``handoff:{c}:blind``, newest first, the last 100), and whatever
        vanished in it carries it."""
        blind = {"stream": self.stream, "from": format_time(since), "to": format_time(now)}
        pipe = self.client.pipeline(transaction=False)
        pipe.lpush(store.blind_key(self.cluster), orjson.dumps(blind))
        pipe.ltrim(store.blind_key(self.cluster), 0, 99)
        pipe.execute()
        return blind
