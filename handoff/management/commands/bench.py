"""``manage.py bench``: measure Handoff beside its baselines, in one run.

The run is a list of sections (``SECTIONS``), each a function of the run's ``Run``; a new
figure (the API's p50/p99, the board's first paint) is one more function and one more entry.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from devtools import bench
from handoff.management.cliargs import readable, writable

# (nodes, pods, churn pods/s, virtual seconds): the scale trace to fold.
FULL = (5000, 150_000, 400.0, 300.0)
QUICK = (500, 10_000, 100.0, 60.0)
# Live latency: events/s to feed, seconds at each rate.
RATES = [1000, 2000, 5000]
LATENCY_SECONDS = {True: 3.0, False: 15.0}
# Pages at scale (issue 19): the store's scale, and seconds of load.
PAGES_SCALE = {True: (1000, 30_000, 100.0, 60.0), False: FULL}
PAGES_SECONDS = {True: 30.0, False: 60.0}
# Watch capacity (issue 21.4): clusters on one watch worker, seconds measured.
CAPACITY = {True: (5, 20.0), False: (20, 120.0)}
# Restore after a crash (issue 19): the scale trace's first 135 s make over 200,000 pods;
# events folded and flushed after the snapshot (a crash just before the next snapshot is
# saved: FoldSettings.snapshot_events, 20,000, and 2 s of its save at 2,000/s), events
# after the last flush (a lapsed lease's 15 s at 2,000/s), and the events after the
# snapshot when snapshots came only every 60 s (120,000 at 2,000/s: a second figure).
RESTORE_SCALE = {True: QUICK, False: (5000, 150_000, 400.0, 135.0)}
RESTORE_TAIL = {True: (5_000, 5_000, 20_000), False: (24_000, 30_000, 120_000)}


@dataclass
class Run:
    """What the sections share: options, where to work, the trace, started services."""

    results: bench.Results
    quick: bool
    workdir: Path
    services: bench.Services
    say: Callable[[str], object]
    trace: Path | None = None
    ingested: bool = False
    given_trace: bool = False

    def scale(self) -> tuple[float, int, float, float]:
        return QUICK if self.quick else FULL


def simulator(run: Run) -> None:
    """Record the scale scenario (the trace the fold and ingest sections use)."""
    if run.trace is not None:
        return  # a given trace: no recording, no simulator figures
    nodes, pods, churn, duration = run.scale()
    run.trace = run.workdir / f"scale-{nodes}-{pods}.jsonl"
    run.say(f"recording the scale scenario ({nodes} nodes, {pods} pods)...")
    seconds = bench.record_scale_trace(run.trace, nodes, pods, churn, duration)
    lines = bench.count_lines(run.trace)
    run.results.add(
        bench.Figure(
            "simulator: scale at --speed max",
            round(lines / seconds),
            "events/s",
            target="≥ 50k events/s",
            met=lines / seconds >= 50_000,
            note=f"{lines} events, {nodes} nodes, {pods} pods, recording included",
        )
    )
    run.say("running it again without recording...")
    events, loop_seconds = bench.simulate_without_recording(nodes, pods, churn, duration)
    run.results.add(
        bench.Figure(
            "simulator: scale at --speed max, nothing recorded",
            round(events / loop_seconds),
            "events/s",
            note=f"{events} watch events from the fan-out, run loop only (no build)",
        )
    )


def fold(run: Run) -> None:
    run.say(f"folding {run.trace}...")
    bench.run_fold_benchmarks(
        run.results,
        _trace(run),
        typed_limit=20_000 if run.quick else 100_000,
        memory_lines=50_000 if run.quick else 400_000,
    )


def triage(run: Run) -> None:
    """``manage.py triage`` end to end against the parse floor, with its split."""
    from devtools.bench import triage as benchtriage

    run.say(f"offline triage of {run.trace}, JSON and table, against the parse floor...")
    benchtriage.run_triage_benchmarks(
        run.results, _trace(run), run.workdir, rounds=3 if run.quick else 2
    )


def ingest(run: Run) -> None:
    run.say("ingesting the trace into Redis with one fold worker...")
    bench.run_ingest_benchmarks(run.results, run.services, _trace(run))
    run.ingested = True


def latency(run: Run) -> None:
    run.say("live latency through a Celery fold worker, channels-redis and Daphne...")
    bench.run_latency_benchmarks(run.results, run.services, RATES, LATENCY_SECONDS[run.quick])


def web(run: Run) -> None:
    """API p50/p99 and the board's first paint, over the pods ``ingest`` stored (it runs
    first when asked for alone: the figures need a full store)."""
    from devtools.bench import web as benchweb

    if not run.ingested:
        ingest(run)
    run.say("timing the API and the board's first paint in headless Chromium...")
    benchweb.run_web_benchmarks(run.results, run.services, rounds=20 if run.quick else 60)


def pages(run: Run) -> None:
    """Every page at scale while ingest runs: its own store (``--trace``, or the scale
    trace when the simulator section recorded it at this size, or a new recording)."""
    from devtools.bench import pages as benchpages

    nodes, pods, churn, duration = PAGES_SCALE[run.quick]
    trace = run.trace
    if trace is None or (not run.given_trace and run.scale() != PAGES_SCALE[run.quick]):
        trace = run.workdir / f"scale-{nodes}-{pods}.jsonl"
        if not trace.exists():
            run.say(f"recording the pages' store ({nodes} nodes, {pods} pods)...")
            bench.record_scale_trace(trace, nodes, pods, churn, duration)
    run.services.stop()  # a fresh Redis, worker and Daphne: nothing left from other sections
    run.say(f"folding {trace} into the pages' store...")
    bench.ingest(run.services.redis_url(), trace)
    run.say("50 clients on every page while ingest runs...")
    benchpages.run_pages_benchmarks(run.results, run.services, PAGES_SECONDS[run.quick])


def capacity(run: Run) -> None:
    """Many simulator clusters held by one watch worker process (issue 21.4)."""
    from devtools.bench import capacity as benchcapacity

    count, seconds = CAPACITY[run.quick]
    run.services.stop()  # a fresh Redis and worker: one stream host, nothing else
    run.say(f"serving {count} steady clusters of {benchcapacity.NODES} nodes on one worker...")
    benchcapacity.run_capacity_benchmarks(run.results, run.services, count=count, seconds=seconds)


def fidelity(run: Run) -> None:
    """The ``fidelity`` scenario on the simulator and on a real control plane started from
    HANDOFF_K8S_ASSETS (manage.py fidelity): how many situations come out identical."""
    from devtools import fidelity as measuring
    from devtools import kubeassets
    from handoff.sim import SCENARIOS

    scenario = SCENARIOS["fidelity"]
    settings = measuring.Settings(scenario, scenario.duration or 95.0, None)
    try:
        with measuring.real_control_plane(run.say) as kubeconfig:
            run.say(f"fidelity: {scenario.name} attached ({settings.duration:.0f} s)...")
            result = measuring.measure(settings, kubeconfig, run.workdir)
    except kubeassets.AssetsMissing as exc:
        run.say(f"fidelity: skipped, no control plane: {exc}")
        return
    total = len(result.compared)
    run.results.add(
        bench.Figure(
            "fidelity: situations identical on the simulator and a real control plane",
            result.identical,
            f"of {total}",
            note=f"{result.header['scenario']}, simulator as {result.header['simulator_version']}"
            f" vs {result.header['server_version']}; differences in docs/simulator.md",
        )
    )
    run.results.sections["fidelity"] = result.json()


def restore(run: Run) -> None:
    """A fold worker killed between snapshots, and its successor's restore (its own store:
    ``--trace``, or the scale trace's first 135 s)."""
    from devtools.bench import restore as benchrestore

    nodes, pods, churn, duration = RESTORE_SCALE[run.quick]
    trace = run.trace if run.given_trace else None
    if trace is None:
        trace = run.workdir / f"scale-{nodes}-{pods}-{duration:.0f}.jsonl"
        if not trace.exists():
            run.say(f"recording the restore's store ({nodes} nodes, {pods} pods)...")
            bench.record_scale_trace(trace, nodes, pods, churn, duration)
    flushed_after, arrived, earlier = RESTORE_TAIL[run.quick]
    run.say(f"folding {trace}, then a crash and restores...")
    benchrestore.run_restore_benchmarks(
        run.results,
        run.services,
        trace,
        bench.count_lines(trace),
        flushed_after,
        arrived,
        earlier,
    )


# In order: ``web`` reads what ``ingest`` stored, ``latency`` starts from an empty Redis,
# ``pages`` builds its own store.
SECTIONS: dict[str, Callable[[Run], None]] = {
    "simulator": simulator,
    "fold": fold,
    "triage": triage,
    "ingest": ingest,
    "web": web,
    "latency": latency,
    "pages": pages,
    "capacity": capacity,
    "fidelity": fidelity,
    "restore": restore,
}
NEEDS_TRACE = {"fold", "triage", "ingest", "web"}


def _trace(run: Run) -> Path:
    if run.trace is None:
        raise CommandError("no trace: run the simulator section or pass --trace")
    return run.trace


class Command(BaseCommand):
    help = "Run the benchmarks; print a markdown table and optionally write JSON."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--quick", action="store_true", help="a reduced run for development")
        parser.add_argument("--json", dest="json_out", help="also write the results here")
        parser.add_argument(
            "--trace", help="fold this trace instead of recording the simulator's scale scenario"
        )
        parser.add_argument("--markdown", help="also write the markdown table here")
        parser.add_argument(
            "--only",
            action="append",
            choices=list(SECTIONS),
            help=f"run only these sections (repeatable; default all: {', '.join(SECTIONS)})",
        )
        parser.add_argument(
            "--figures",
            metavar="DIR",
            help="write the Plotly figures (HTML and PNG) here, e.g. docs/",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        # Bad paths end the run before minutes of benchmarks, not after.
        if options["trace"]:
            readable(options["trace"], "--trace")
        for option, key in (("--json", "json_out"), ("--markdown", "markdown")):
            if options[key]:
                writable(options[key], option)
        if options["figures"]:
            figures = Path(options["figures"])
            if not figures.is_dir():  # made here (as `make bench` expects), its parent checked
                writable(figures, "--figures")
                figures.mkdir()
        workdir = Path(settings.BASE_DIR) / ".run" / "bench"
        workdir.mkdir(parents=True, exist_ok=True)
        results = bench.Results(
            bench.machine(), shlex.join(["python", *sys.argv]), code=bench.code_version()
        )
        run = Run(
            results,
            options["quick"],
            workdir,
            bench.Services(workdir),
            lambda text: self.stderr.write(text),
            Path(options["trace"]) if options["trace"] else None,
            given_trace=bool(options["trace"]),
        )
        chosen = options["only"] or list(SECTIONS)
        if run.trace is None and NEEDS_TRACE & set(chosen) and "simulator" not in chosen:
            chosen = ["simulator", *chosen]
        try:
            for name in SECTIONS:
                if name in chosen:
                    SECTIONS[name](run)
        finally:
            run.services.stop()
        table = bench.markdown(results)
        self.stdout.write(table)
        if options["json_out"]:
            Path(options["json_out"]).write_text(bench.to_json(results))
        if options["markdown"]:
            Path(options["markdown"]).write_text(table)
        if options["figures"]:
            for path in bench.write_figures(results, Path(options["figures"])):
                self.stderr.write(f"wrote {path}")
