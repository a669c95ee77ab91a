"""`python manage.py demo` (what `make demo` runs): the whole stack on this machine."""

import os

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandParser

from devtools.devstack import Devstack
from handoff.management.cliargs import port


class Command(BaseCommand):
    help = "Run Redis, Celery worker and beat, Daphne and the simulator; Ctrl-C stops them all."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.getenv("HANDOFF_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.getenv("HANDOFF_PORT", "8000")))
        parser.add_argument(
            "--no-simulator", action="store_true", help="do not start the simulator"
        )

    def handle(self, *args, **options) -> None:
        port(options["port"])
        stack = Devstack(
            base_dir=settings.BASE_DIR,
            run_dir=settings.RUN_DIR,
            host=options["host"],
            port=options["port"],
            # An explicit REDIS_URL means "use that one": no private redis-server.
            redis_url=os.getenv("REDIS_URL"),
            # The simulator lands with its own issue; until then the demo runs without it.
            with_simulator="simulate" in get_commands() and not options["no_simulator"],
        )
        code = stack.run()
        if code:
            raise SystemExit(code)
