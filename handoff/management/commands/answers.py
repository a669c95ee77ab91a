"""`python manage.py answers`: the answer builder (``handoff/live/pages/builder.py``), which
``serve`` runs beside its Daphne processes so that they only send the fleet and nodes
answers, never build them."""

from __future__ import annotations

import signal
import threading
from types import FrameType

from django.core.management.base import BaseCommand

from handoff import conf
from handoff.live.pages.builder import AnswerBuilder


class Command(BaseCommand):
    help = "Build the shared fleet and nodes answers for every web process, until stopped."

    def handle(self, *args, **options) -> None:
        stop = threading.Event()

        def on_signal(_signum: int, _frame: FrameType | None) -> None:
            stop.set()

        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, on_signal)
        client = conf.redis_client(timeout=30)
        try:
            AnswerBuilder(client).run(stop)
        finally:
            client.close()
