"""Where a request's time went, told in its ``Server-Timing`` header (a W3C header the
browsers' developer tools draw, and the pages bench reads).

``queue``: from the moment Daphne handed the request to the application until Django's
middleware began running it (Django runs every sync view of a process on one thread, so a
request waits there behind the others); ``view``: the middleware and the view, of which
``cpu`` is the view thread's own CPU time, ``runq`` the time it was ready but the kernel
ran something else (the machine's cores were busy: /proc's schedstat) and ``gc`` the
Python garbage collector's pauses in this process while it ran (any thread's: they stop
every thread); the rest of ``view`` is waiting for Redis or for the GIL. ``app``: from
hand-over to the response's first byte.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from django.http import HttpRequest, HttpResponse

ARRIVED = "handoff.arrived"  # the scope key: perf_counter() when Daphne handed it over
HEADER = "Server-Timing"

_gc = {"total": 0.0, "started": 0.0}
_gc_lock = threading.Lock()


def _on_gc(phase: str, _info: dict[str, Any]) -> None:
    now = time.perf_counter()
    if phase == "start":
        _gc["started"] = now
    elif _gc["started"]:
        with _gc_lock:
            _gc["total"] += now - _gc["started"]
        _gc["started"] = 0.0


def gc_seconds() -> float:
    """Seconds this process has spent in the garbage collector since timing began."""
    return _gc["total"]


def watch_gc() -> None:
    """Count the collector's pauses (once per process)."""
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)


def run_queue_seconds() -> float:
    """Seconds this thread has waited on a run queue (ready, not running); 0 where the
    kernel does not tell (no /proc/thread-self/schedstat)."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def metric(name: str, seconds: float) -> str:
    return f"{name};dur={seconds * 1000:.1f}"


class ServerTimingMiddleware:
    """Django's part: ``queue``, ``view`` and ``gc`` (first in MIDDLEWARE)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        watch_gc()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        cpu, runq, gc_before = time.thread_time(), run_queue_seconds(), gc_seconds()
        response = self.get_response(request)
        metrics = [
            metric("view", time.perf_counter() - started),
            metric("cpu", time.thread_time() - cpu),
            metric("runq", run_queue_seconds() - runq),
            metric("gc", gc_seconds() - gc_before),
        ]
        arrived = getattr(request, "scope", {}).get(ARRIVED)
        if arrived is not None:
            metrics.insert(0, metric("queue", started - arrived))
        previous = response.get(HEADER)
        response[HEADER] = ", ".join([*([previous] if previous else []), *metrics])
        return response


Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ServerTiming:
    """The ASGI part around Django: stamps the hand-over, adds ``app`` to the header."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        arrived = time.perf_counter()
        scope = {**scope, ARRIVED: arrived}

        async def timed(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                app = metric("app", time.perf_counter() - arrived).encode()
                headers = list(message.get("headers") or [])
                for index, (name, value) in enumerate(headers):
                    if name.lower() == b"server-timing":
                        headers[index] = (name, value + b", " + app)
                        break
                else:
                    headers.append((b"server-timing", app))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, timed)
