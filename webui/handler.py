"""Django's ASGI handler, without the reference cycle it leaves behind every request.

Django 5.2's ``ASGIHandler.handle`` runs the view in one task beside a second that listens
for the client's disconnect, and waits for the first of the two to finish. Daphne sends
``http.disconnect`` as soon as it has written a response's last byte, so the listener ends,
every time, by raising ``RequestAborted``. ``handle`` reads that result and ignores it, but the
exception's traceback now holds ``handle``'s frame, whose list of tasks holds the listener,
which holds the exception: a cycle that keeps the request, its response, both tasks, their
coroutines and contexts alive until a collection finds them (Django ticket #36700). It was
about half of the objects a page left to a web process's collector, and those collections
stop every request and websocket of the process (docs/benchmarks.md).

Here the listener returns on a disconnect instead of raising. To Django 5.2's ``handle`` that
is the same thing: it ignores the listener's ``RequestAborted``, and a view still running when
the listener finishes is cancelled either way (``asyncio.wait(FIRST_COMPLETED)``). A later
``handle`` need not agree: Baserow's review of the same fix reports that Django 6.1's,
rewritten around a ``TaskGroup``, cancels the view only when the listener raises. So the
override is used only with the version whose ``handle`` was read, 5.2 (what requirements.txt
pins); any other gets Django's own handler, and tests/webui/test_handler.py then fails,
asking for ``handle`` to be read again.
"""

from __future__ import annotations

from typing import Any

import django
from django.core.handlers.asgi import ASGIHandler

READ_FOR = (5, 2)  # the Django whose ASGIHandler.handle this module was written against


class Handler(ASGIHandler):
    """``ASGIHandler`` whose disconnect listener returns rather than raises."""

    async def listen_for_disconnect(self, receive: Any) -> None:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        # As Django's: an ASGI server that sends anything else after the body is broken.
        raise AssertionError(f"Invalid ASGI message after request body: {message['type']}")


def get_asgi_application() -> ASGIHandler:
    """``django.core.asgi.get_asgi_application``, with ``Handler`` where it was read for."""
    django.setup(set_prefix=False)
    return Handler() if django.VERSION[:2] == READ_FOR else ASGIHandler()
