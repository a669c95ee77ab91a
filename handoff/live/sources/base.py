"""What every watch source shares: the tuning knobs, the errors the loops act on, and the
two things a watch is handed (as kopf's clients are): a ``Sink`` that stores what it saw
and its progress, and a ``Held`` lease it keeps renewed. The watch loop knows no storage.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class WatchSettings:
    """Every knob of a watch stream, in one place (filled from Django settings by tasks)."""

    # Seconds a task watches before handing the stream to its successor task.
    window: float = 300.0
    # The server ends each watch request after this many seconds (timeoutSeconds).
    server_timeout: int = 240
    # No byte for this long on an open watch means a dead connection (bookmarks come
    # about every minute, so this must be longer than that).
    read_timeout: float = 90.0
    connect_timeout: float = 10.0
    # Lease: a holder renews every ttl/3; a crashed holder's lease lapses after ttl.
    lease_ttl: float = 6.0
    # Exponential backoff with full jitter between failed API calls.
    backoff_base: float = 0.5
    backoff_cap: float = 30.0

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.backoff_cap * 4)
        ceiling = min(self.backoff_cap, self.backoff_base * (2**attempt))
        return random.uniform(ceiling / 2, ceiling)


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410 or a watch ERROR with code 410): relist."""


class SourceError(Exception):
    """An API call failed; ``retry_after`` is the server's Retry-After, if any."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class WatchSource(Protocol):
    """A cluster API that can list and watch one resource (pods, nodes, events)."""

    def api_version(self, resource: str) -> tuple[str, str]:
        """(apiVersion, kind) of the resource's objects, as the cluster serves them."""
        ...

    def list(self, resource: str) -> tuple[list[dict[str, Any]], str]:
        """Every object (kind/apiVersion filled in) and the list's resourceVersion."""
        ...

    def watch(
        self, resource: str, resource_version: str, settings: WatchSettings
    ) -> Iterator[dict[str, Any]]:
        """The watch events ({type, object}) of one watch request from a version."""
        ...

    def interrupt(self) -> None:
        """Unblock a watch in progress (from another thread): the lease was lost."""
        ...


class Sink(Protocol):
    """Where one stream (``stream``, a resource) of one cluster goes, with its progress:
    ``handoff.live.sources.sink.StreamSink`` writes the cluster's Redis Stream."""

    cluster: str
    stream: str
    clock: Callable[[], float]
    Unavailable: type[Exception]  # the storage cannot be reached: the step failed

    def write(
        self,
        events: Iterable[tuple[str, dict[str, Any]]],
        resource_version: str | None = None,
        observed: float | None = None,
        extra: dict[str, Any] | None = None,
    ) -> int:
        """Store watch events (type, object); checkpoint the version with them."""
        ...

    def checkpoint(self, resource_version: str) -> None: ...

    def heard(self) -> None: ...

    def error(self, message: str, failures: int = 1) -> None: ...

    def recovered(self) -> None: ...

    def state(self) -> dict[str, str]:
        """The stream's progress: rv, last_event, failures, ..."""
        ...

    def note(self, **values: Any) -> None:
        """Record progress values (relisted, listed, ...)."""
        ...

    def known(self) -> dict[str, list[str]]:
        """uid -> [namespace, name, resourceVersion] of the objects the watch last saw."""
        ...

    def forget_known(self) -> None: ...

    def forget_version(self) -> None:
        """Drop the checkpointed version: the next step relists."""
        ...

    def blind(self, since: float, now: float) -> dict[str, str]:
        """Record that the stream was not watched from ``since`` to ``now``; the interval."""
        ...


class Held(Protocol):
    """A lease the loop keeps renewed while it runs (``handoff.live.leases.Lease``)."""

    def keep(
        self, stop: threading.Event, on_lost: Callable[[], object] = ...
    ) -> threading.Thread: ...
