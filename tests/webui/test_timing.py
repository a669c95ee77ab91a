"""Every answer of the web tells where its time went (webui/timing.py): Server-Timing
through the real ASGI application, as Daphne runs it."""

from __future__ import annotations

import gc
import itertools

import pytest
from channels.testing import HttpCommunicator

from handoff.asgi import application
from webui import timing

pytestmark = pytest.mark.django_db(transaction=True)


async def test_an_answer_tells_its_queue_view_cpu_runq_gc_and_app_time():
    answer = await HttpCommunicator(
        application, "GET", "/accounts/login/", headers=[(b"host", b"127.0.0.1")]
    ).get_response()
    assert answer["status"] == 200
    headers = [
        value.decode() for name, value in answer["headers"] if name.lower() == b"server-timing"
    ]
    assert len(headers) == 1, answer["headers"]
    parts = {}
    for entry in headers[0].split(","):
        name, _, duration = entry.strip().partition(";dur=")
        parts[name] = float(duration)
    assert set(parts) == {"queue", "view", "cpu", "runq", "gc", "app"}
    assert all(ms >= 0 for ms in parts.values())
    assert parts["view"] > 0
    # app covers the queue and the view (one decimal each: allow their rounding).
    assert parts["app"] + 0.1 >= parts["queue"] + parts["view"]


def test_collector_pauses_are_counted():
    timing.watch_gc()
    timing.watch_gc()  # once per process, however often asked
    assert gc.callbacks.count(timing._on_gc) == 1
    before = timing.gc_seconds()
    garbage = [[] for _ in range(100_000)]
    for a, b in itertools.pairwise(garbage):
        a.append(b)
        b.append(a)
    del garbage
    gc.collect()
    assert timing.gc_seconds() > before


def test_run_queue_time_only_grows():
    first = timing.run_queue_seconds()
    sum(range(200_000))
    assert timing.run_queue_seconds() >= first >= 0.0
