"""``manage.py bench``: measure Handoff beside its baselines, in one run."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from handoff import bench

# (nodes, pods, churn pods/s, virtual seconds): the scale trace to fold.
FULL = (5000, 150_000, 400.0, 300.0)
QUICK = (500, 10_000, 100.0, 60.0)


class Command(BaseCommand):
    help = "Run the benchmarks; print a markdown table and optionally write JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="a reduced run for development")
        parser.add_argument("--json", dest="json_out", help="also write the results here")
        parser.add_argument(
            "--trace", help="fold this trace instead of recording the simulator's scale scenario"
        )
        parser.add_argument("--markdown", help="also write the markdown table here")

    def handle(self, *args: Any, **options: Any) -> None:
        quick = options["quick"]
        results = bench.Results(bench.machine(), shlex.join(["python", *sys.argv]))
        workdir = Path(settings.BASE_DIR) / ".run" / "bench"
        workdir.mkdir(parents=True, exist_ok=True)
        trace = Path(options["trace"]) if options["trace"] else None
        if trace is None:
            nodes, pods, churn, duration = QUICK if quick else FULL
            trace = workdir / f"scale-{nodes}-{pods}.jsonl"
            self.stderr.write(f"recording the scale scenario ({nodes} nodes, {pods} pods)...")
            seconds = bench.record_scale_trace(trace, nodes, pods, churn, duration)
            lines = bench.count_lines(trace)
            results.add(
                bench.Figure(
                    "simulator: scale at --speed max",
                    round(lines / seconds),
                    "events/s",
                    target="≥ 50k events/s",
                    met=lines / seconds >= 50_000,
                    note=f"{lines} events, {nodes} nodes, {pods} pods, recording included",
                )
            )
            self.stderr.write("running it again without recording...")
            events, loop_seconds = bench.simulate_without_recording(nodes, pods, churn, duration)
            results.add(
                bench.Figure(
                    "simulator: scale at --speed max, nothing recorded",
                    round(events / loop_seconds),
                    "events/s",
                    note=f"{events} watch events from the fan-out, run loop only (no build)",
                )
            )
        self.stderr.write(f"folding {trace}...")
        bench.run_fold_benchmarks(
            results,
            trace,
            typed_limit=20_000 if quick else 100_000,
            memory_lines=50_000 if quick else 400_000,
        )
        table = bench.markdown(results)
        self.stdout.write(table)
        if options["json_out"]:
            Path(options["json_out"]).write_text(bench.to_json(results))
        if options["markdown"]:
            Path(options["markdown"]).write_text(table)
