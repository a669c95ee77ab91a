"""`python manage.py demo` (what `make demo` runs): the whole stack on this machine,
watching the simulator or, with --kubeconfig, your own cluster (read-only)."""

import os
import re

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools.devstack import Devstack
from handoff.management import clustercheck
from handoff.management.cliargs import port


class Command(BaseCommand):
    help = "Run Redis, Celery worker and beat, Daphne and the simulator; Ctrl-C stops them all."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.getenv("HANDOFF_HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.getenv("HANDOFF_PORT", "8000")))
        parser.add_argument(
            "--no-simulator", action="store_true", help="do not start the simulator"
        )
        parser.add_argument(
            "--kubeconfig",
            metavar="PATH",
            help="watch this kubeconfig's cluster (read-only) instead of the simulator",
        )
        parser.add_argument(
            "--context", default="", help="with --kubeconfig: its context (default: current)"
        )

    def handle(self, *args, **options) -> None:
        port(options["port"])
        watch = self._checked(options["kubeconfig"], options["context"])
        stack = Devstack(
            base_dir=settings.BASE_DIR,
            run_dir=settings.RUN_DIR,
            host=options["host"],
            port=options["port"],
            # An explicit REDIS_URL means "use that one": no private redis-server.
            redis_url=os.getenv("REDIS_URL"),
            with_simulator=(
                watch is None and "simulate" in get_commands() and not options["no_simulator"]
            ),
            watch=watch,
        )
        code = stack.run()
        if code:
            raise SystemExit(code)

    def _checked(self, kubeconfig: str | None, context: str) -> tuple[str, str, str] | None:
        """(cluster name, kubeconfig, context) once the API answered, before anything
        starts; a kubeconfig that does not work is one line and exit 1."""
        if not kubeconfig:
            if context:
                raise CommandError("--context needs --kubeconfig")
            return None
        try:
            configuration, context = clustercheck.kubeconfig_context(kubeconfig, context)
            version = clustercheck.api_version(configuration)
        except clustercheck.Invalid as exc:
            raise CommandError(str(exc)) from exc
        name = re.sub(r"[^a-zA-Z0-9\-_.]+", "-", context).strip("-") or "cluster"
        path = str(os.path.abspath(os.path.expanduser(kubeconfig)))
        self.stdout.write(
            f"[demo] {name}: context {context} at {configuration.host} ({version}), read-only"
        )
        return name[:60], path, context
