"""The web's ASGI handler (webui/handler.py) serves a request without leaving a reference
cycle behind, and still cancels a view whose client went away. Driven as Daphne drives it:
``http.disconnect`` arrives the moment the response's last byte is sent."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import django
import pytest
from django.contrib.auth.decorators import login_not_required
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpResponse
from django.urls import path

from handoff.asgi import application
from webui import handler

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = {
    "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
    "scheme": "http", "path": "/accounts/login/", "raw_path": b"/accounts/login/",
    "query_string": b"", "root_path": "", "headers": [(b"host", b"127.0.0.1")],
    "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000),
}  # fmt: skip


async def _serve_as_daphne(app: Any, scope: dict[str, Any]) -> list[dict[str, Any]]:
    """One request through ``app``; like Daphne, the disconnect follows the last byte."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "http.request", "body": b""})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            inbox.put_nowait({"type": "http.disconnect"})

    await app(scope, inbox.get, send)
    return sent


def _left_for_the_collector(app: Any, requests: int) -> list[Any]:
    """What the collector finds unreachable after ``requests`` served requests."""
    for _ in range(3):  # first requests build caches (URL resolvers, templates)
        asyncio.run(_serve_as_daphne(app, SCOPE))
    gc.collect()
    gc.disable()
    try:
        for _ in range(requests):
            sent = asyncio.run(_serve_as_daphne(app, SCOPE))
            assert sent[0]["status"] == 200
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _handler_cycles(garbage: list[Any]) -> list[str]:
    """The frames of Django's ASGI handler among ``garbage``: its cycle's signature."""
    return [
        o.f_code.co_name for o in garbage
        if type(o).__name__ == "frame" and o.f_code.co_filename.endswith("handlers/asgi.py")
    ]  # fmt: skip


def test_the_pinned_django_gets_the_handler_that_was_read_for_it():
    assert django.VERSION[:2] == handler.READ_FOR, (
        "Django moved: read its ASGIHandler.handle again (webui/handler.py) before moving "
        "READ_FOR: a later handle may no longer cancel the view when the listener returns"
    )
    assert isinstance(application.application_mapping["http"].app, handler.Handler)


def test_a_served_request_leaves_no_cycle_of_the_handler():
    assert _handler_cycles(_left_for_the_collector(handler.Handler(), 20)) == []


def test_djangos_own_handler_leaves_one_per_request():
    """The reason for webui/handler.py: if Django stops leaving it, the override can go."""
    names = _handler_cycles(_left_for_the_collector(ASGIHandler(), 20))
    assert names.count("handle") == 20


cancelled: list[str] = []


@login_not_required
async def slow_view(request: Any) -> HttpResponse:
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        cancelled.append(request.path)
        raise
    return HttpResponse("late")


urlpatterns = [path("slow/", slow_view)]


async def test_a_client_that_leaves_mid_view_still_cancels_the_view(settings):
    settings.ROOT_URLCONF = __name__
    cancelled.clear()
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    inbox.put_nowait({"type": "http.request", "body": b""})
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {**SCOPE, "path": "/slow/", "raw_path": b"/slow/"}
    serving = asyncio.ensure_future(handler.Handler()(scope, inbox.get, send))
    await asyncio.sleep(0.2)  # the view is asleep
    inbox.put_nowait({"type": "http.disconnect"})
    await asyncio.wait_for(serving, 5)
    assert cancelled == ["/slow/"]
    assert sent == []
