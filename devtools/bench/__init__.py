"""Benchmarks, each measured beside its baseline in the same run so the ratio
holds on a noisy machine. ``manage.py bench`` runs them; docs/benchmarks.md
records the figures.

Figures so far: the fold (against the orjson parse floor and against the
kubernetes client's typed deserialisation, what a quick script does), the
fold's memory per pod, offline triage of a whole trace (seconds and peak RSS) and,
end to end against the parse floor with its split, for JSON and the table
(``devtools.bench.triage``), and the simulator's own event rate.
"""

from devtools.bench.figures import write_figures
from devtools.bench.fold import (
    count_lines,
    record_scale_trace,
    run_fold_benchmarks,
    simulate_without_recording,
)
from devtools.bench.ingest import ingest, run_ingest_benchmarks
from devtools.bench.latency import (
    Feeder,
    caught_up,
    live_latency,
    percentiles,
    run_latency_benchmarks,
)
from devtools.bench.results import Figure, Results, code_version, machine, markdown, to_json
from devtools.bench.services import Services

__all__ = [
    "Feeder",
    "Figure",
    "Results",
    "Services",
    "caught_up",
    "code_version",
    "count_lines",
    "ingest",
    "live_latency",
    "machine",
    "markdown",
    "percentiles",
    "record_scale_trace",
    "run_fold_benchmarks",
    "run_ingest_benchmarks",
    "run_latency_benchmarks",
    "simulate_without_recording",
    "to_json",
    "write_figures",
]
