"""The ingest and live-latency sections of `manage.py bench` against the real processes
they start (redis-server, a Celery worker, Daphne), on small inputs: the numbers they
report must describe what really went through."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from devtools import bench
from handoff.core.report import build_report
from handoff.core.trace import TraceReader
from handoff.offline.triage import fold_file

TRACES = Path(__file__).parent.parent / "data" / "traces"


@pytest.fixture
def services(tmp_path: Path):
    started = bench.Services(tmp_path)
    yield started
    started.stop()


def test_ingest_folds_every_event_of_the_trace_into_pod_views(services):
    trace = TRACES / "node-lost.jsonl"
    results = bench.Results(bench.machine(), "test")
    run = bench.run_ingest_benchmarks(results, services, trace)
    timeline, _ = fold_file(trace)
    assert run.lines == sum(1 for _ in TraceReader(trace))
    assert run.pods == len(build_report(timeline)["pods"])
    assert run.views_bytes > 200 * run.pods  # a view is JSON of a few hundred bytes at least
    rate, memory = results.figures
    assert rate.unit == "events/s"
    assert rate.value > 0
    assert memory.value == round(run.views_bytes / run.pods)
    assert results.series["ingest throughput"][-1]["events"] == run.lines


@pytest.mark.slow
def test_live_latency_sees_every_pod_through_daphne_and_the_group(services):
    rows = bench.live_latency(services, rates=[200], seconds=2.0, warmup=0.5)
    (row,) = rows
    assert row["events"] == 400
    for path in ("websocket", "group"):
        assert row[path]["missing"] == 0, path
        assert row[path]["n"] == 300
        assert 0 < row[path]["p50_ms"] <= row[path]["p99_ms"] < 5000
    # Daphne forwards what it gets from the group: the browser cannot be first.
    assert row["group"]["p50_ms"] <= row["websocket"]["p50_ms"]
    assert row["cpu_s_per_1k_pods"]["worker"] > 0


@pytest.mark.slow
def test_the_command_writes_json_and_figures(tmp_path):
    out = tmp_path / "bench.json"
    call_command(
        "bench", "--trace", str(TRACES / "podgc-new-style.jsonl"), "--only", "ingest",
        "--json", str(out), "--figures", str(tmp_path / "fig"), stdout=io.StringIO(),
        stderr=io.StringIO(),
    )  # fmt: skip
    data = json.loads(out.read_text())
    assert next(f["name"] for f in data["figures"]).startswith("ingest")
    assert (tmp_path / "fig" / "benchmarks-throughput.png").stat().st_size > 10_000
    assert (tmp_path / "fig" / "benchmarks-throughput.html").exists()


@pytest.mark.slow
def test_the_pages_section_loads_every_page_while_ingest_runs(services):
    from devtools.bench import pages

    bench.ingest(services.redis_url(), TRACES / "node-lost.jsonl")
    result = pages.run_pages(
        services, clients=4, seconds=3.0, subscribers=2, rate=100, think=(0.05, 0.2)
    )
    for page in pages.PAGES:
        row = result[page]
        assert row["errors"] == 0, (page, row)
        assert row["n"] > 0, page
        assert 0 < row["p50_ms"] <= row["p99_ms"]
        assert row["kb_p50"] > 0, page  # what went over the wire per load
        assert result["people"][page]["errors"] == 0, (page, result["people"][page])
    # People read before the next page: fewer pages per second than the closed loop.
    assert 0 < result["people"]["pages_per_s"] < result["pages_per_s"]
    assert result["people"]["think_s"] == [0.05, 0.2]
    # The people began once the fold had caught up with the feed the closed loop left.
    assert result["people"]["settled"]["reached"] is True
    assert result["people"]["settled"]["lag_after_s"] < pages.SETTLE_LAG_S
    assert result["web_processes"] >= 1
    # Every sample tells where its time went (the web's Server-Timing), and the phase what
    # the processes used and how late the load process's own loop ran.
    for phase in (result, result["people"]):
        for page in pages.PAGES:
            server = phase[page]["server"]
            assert server["timed"] == phase[page]["n"], (page, server)
            assert 0 < server["view_p50_ms"] <= server["app_p50_ms"], (page, server)
        assert phase["tail"]["n"] > 0
        assert phase["cpu_cores"]["daphne"] > 0
        assert phase["cpu_cores"]["worker"] > 0
        assert phase["cpu_cores"]["machine"] >= phase["cpu_cores"]["daphne"]
        assert phase["cpu_cores"]["steal"] >= 0
        assert phase["client_loop_lag"]["p99_ms"] is not None
    # Every fed pod reached both subscribers, and the fold kept up with the feed.
    for phase in (result, result["people"]):
        assert phase["ws"]["missing"] == 0
        assert phase["ws"]["n"] > 0
        tail = phase["ws"]["tail"]  # the slowest frames, split where the group got them
        assert tail["n"] > 0
        assert tail["layer_p50_ms"] > 0, tail
        assert tail["daphne_p50_ms"] > 0, tail
        assert phase["ingest_events_per_s"] > 50
        assert phase["fed_events_per_s"] > 50  # the feeder ran through the phase
    assert result["store_pods"] == len(
        build_report(fold_file(TRACES / "node-lost.jsonl")[0])["pods"]
    )


@pytest.mark.slow
def test_stopping_the_services_lets_the_fold_task_stop_against_a_live_redis(tmp_path):
    """Redis is stopped last: on the worker's warm shutdown the fold task checkpoints and
    releases its lease, where it used to log a ConnectionError because Redis was gone."""
    services = bench.Services(tmp_path)
    try:
        services.live_stack("stopping")  # returns once the fold task holds its lease
    finally:
        services.stop()
    log = (tmp_path / "worker.log").read_text()
    assert "ConnectionError" not in log, log[-3000:]
