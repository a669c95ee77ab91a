"""``manage.py simulate``: run a simulated cluster scenario, record it as a trace v1 file."""

from __future__ import annotations

import signal
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.sim import SCENARIOS, Options, find_scenario, run


def _speed(text: str) -> float | None:
    if text == "max":
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise CommandError(f"--speed takes a number or 'max', not {text!r}") from exc
    if value <= 0:
        raise CommandError("--speed must be positive")
    return value


class Command(BaseCommand):
    help = "Run a simulated cluster (scheduler, kubelets, PodGC, node lifecycle) and record it."

    def add_arguments(self, parser: CommandParser) -> None:
        where = parser.add_mutually_exclusive_group()
        where.add_argument(
            "--scenario", choices=sorted(SCENARIOS), help="a named scenario (default: steady)"
        )
        where.add_argument("--file", help="a YAML scenario file (see docs/simulator.md)")
        parser.add_argument("--seed", type=int, default=0, help="RNG seed (default 0)")
        parser.add_argument(
            "--speed",
            default=None,
            help="virtual seconds per wall second, or 'max' (default: max with --record, else 1)",
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            help="virtual seconds to run (default: the scenario's; steady runs until Ctrl-C)",
        )
        parser.add_argument("--record", help="write the trace here (.gz to compress)")
        parser.add_argument("--nodes", type=int, help="scale/steady: number of nodes")
        parser.add_argument("--pods", type=int, help="scale: number of pods")
        parser.add_argument("--churn", type=float, help="scale/steady: pods created per second")
        parser.add_argument(
            "--events-api",
            choices=("v1", "events.k8s.io/v1"),
            default="v1",
            help="which Event API the recording watches (default v1)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["scenario"] or (None if options["file"] else "steady")
        try:
            scenario = find_scenario(name, options["file"])
        except (KeyError, OSError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        speed_text = options["speed"] or ("max" if options["record"] else "1")
        opts = Options(
            seed=options["seed"],
            duration=options["duration"],
            nodes=options["nodes"],
            pods=options["pods"],
            churn=options["churn"],
            file=options["file"],
        )
        # SIGTERM stops the run cleanly, so the recording is flushed and closed.
        signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
        _, stats = run(
            scenario,
            opts,
            record=options["record"],
            speed=_speed(speed_text),
            events_group=options["events_api"],
        )
        self.stdout.write(stats.describe())
        if options["record"]:
            self.stdout.write(f"trace written to {options['record']}")
        sys.stdout.flush()
