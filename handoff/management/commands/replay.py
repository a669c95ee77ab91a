"""``manage.py replay FILE --cluster NAME [--speed X|max]``: a trace through the live path."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff import conf
from handoff.live import clusters, leases
from handoff.live.sources.playback import replay
from handoff.management.cliargs import (
    NOTHING_USABLE,
    is_tty,
    nothing_usable,
    readable,
    why_nothing,
)
from handoff.management.cliargs import speed as parse_speed


class Command(BaseCommand):
    help = "Send a recorded trace through the ingestion (stream, fold, push) of a cluster."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="trace v1 (.jsonl or .jsonl.gz)")
        parser.add_argument("--cluster", required=True, help="a configured cluster's name")
        parser.add_argument(
            "--speed", default="max", help="recorded seconds per second, or 'max' (default)"
        )
        parser.add_argument(
            "--no-fold", action="store_true", help="do not start the cluster's fold worker"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        speed = parse_speed(options["speed"])
        name = options["cluster"]
        readable(options["file"])
        with conf.redis_client() as client:
            if clusters.cluster(client, name) is None:
                raise CommandError(
                    f"no cluster named {name!r}: add it first "
                    f"(python manage.py clusters add {name} --trace {options['file']})"
                )
            if not options["no_fold"] and leases.holder(client, name, clusters.FOLD) is None:
                from handoff.tasks import start_stream

                start_stream(name, clusters.FOLD)
            bar = _Bar(self.stdout) if is_tty(self.stdout) else None
            sent = [0]

            def progress(count: int, fraction: float) -> None:
                sent[0] = count
                if bar is not None:
                    bar.show(count, fraction)

            try:
                reader = replay(client, name, options["file"], speed, progress=progress)
            except OSError as exc:
                raise CommandError(f"cannot read {options['file']}: {exc.strerror or exc}") from exc
        if bar is not None:
            bar.done()
        for error in reader.errors[:20]:
            self.stderr.write(f"{options['file']}: {error}")
        if sent[0] == 0:
            self.stderr.write(nothing_usable(options["file"], why_nothing(reader)))
            sys.exit(NOTHING_USABLE)
        self.stdout.write(f"replayed {sent[0]} events ({reader.lines_read} lines) into {name}")


class _Bar:
    WIDTH = 40

    def __init__(self, stream: Any) -> None:
        self.out = getattr(stream, "_out", sys.stdout)
        self.shown = -1

    def show(self, sent: int, fraction: float) -> None:
        filled = int(self.WIDTH * min(1.0, fraction))
        if filled == self.shown:
            return
        self.shown = filled
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.out.write(f"\r[{bar}] {fraction:4.0%} {sent} events")
        self.out.flush()

    def done(self) -> None:
        self.out.write("\n")
        self.out.flush()
