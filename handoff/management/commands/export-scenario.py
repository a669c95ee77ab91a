"""``manage.py export-scenario --trace FILE --out X.yaml``: a recorded incident as a
simulator user scenario (docs/interop.md), to run again with ``simulate --file X.yaml``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.interop.exporters.scenario import scenario_from_events
from handoff.interop.importers import open_events
from handoff.management.cliargs import readable, writable


class Command(BaseCommand):
    help = "Turn a trace (or any input `convert` reads) into a simulator scenario file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--trace", required=True, help="trace v1 or any importer input")
        parser.add_argument("--out", required=True, help="the YAML scenario to write")
        parser.add_argument("--name", help="scenario name (default: the output file's stem)")

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"])
        readable(options["trace"], "--trace")
        writable(out, "--out")
        reader = open_events(options["trace"])
        try:
            scenario = scenario_from_events(reader, options["name"] or out.stem)
        except OSError as exc:
            raise CommandError(f"cannot read {options['trace']}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            for error in reader.errors[:20]:
                self.stderr.write(f"{options['trace']}: {error}")
            self.stderr.write(f"{options['trace']}: {exc}")
            sys.exit(2)
        for error in reader.errors[:20]:
            self.stderr.write(f"{options['trace']}: {error}")
        out.write_text(yaml.safe_dump(scenario, sort_keys=False, allow_unicode=True))
        self.stdout.write(
            f"wrote {out}: {len(scenario['nodes'])} nodes, {len(scenario['workloads'])} "
            f"workloads, {len(scenario['faults'])} faults, {scenario['duration']} s"
        )
