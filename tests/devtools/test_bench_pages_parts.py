"""The pages bench's breakdown of a page's time (devtools/bench/pages.py): the web's
Server-Timing header read, summed per page and summarised, on made-up samples; the
report's judging; the wait for the fold between the two client models."""

from __future__ import annotations

import time

from devtools.bench import pages


def test_server_timing_reads_every_named_duration():
    header = "queue;dur=1.5, view;dur=12.0, cpu;dur=3, runq;dur=0.2, gc;dur=0.0, app;dur=14.1"
    assert pages.server_timing(header) == {
        "queue": 1.5, "view": 12.0, "cpu": 3.0, "runq": 0.2, "gc": 0.0, "app": 14.1,
    }  # fmt: skip
    assert pages.server_timing('cache;desc="hit", app;dur=oops, db;dur=2') == {"db": 2.0}
    assert pages.server_timing(None) == {}


def _samples(rows: list[tuple[float, float | None, float]]) -> dict:
    """(client ms, app ms or None when the answer had no header, gc ms) per sample."""
    samples: dict = {"ms": [], "at": [], "errors": 0, **{n: [] for n in pages.SERVER_PARTS}}
    for ms, app, gc in rows:
        samples["ms"].append(ms)
        samples["at"].append(0.0)
        for name in pages.SERVER_PARTS:
            samples[name].append(None if app is None else 0.0)
        if app is not None:
            samples["app"][-1], samples["view"][-1], samples["gc"][-1] = app, app - 1, gc
    return samples


def test_server_parts_tell_the_server_from_what_lies_outside_it():
    parts = pages.server_parts(_samples([(10.0, 8.0, 0.0)] * 99 + [(900.0, 100.0, 90.0)]))
    assert parts["timed"] == 100
    assert parts["app_p50_ms"] == 8.0
    assert parts["app_p99_ms"] == 100.0
    # The slowest sample spent 800 ms outside the web process: client or socket queue.
    assert parts["outside_p50_ms"] == 2.0
    assert parts["outside_p99_ms"] == 800.0
    assert parts["gc_p99_ms"] == 90.0
    assert pages.server_parts(_samples([(10.0, None, 0.0)])) == {"timed": 0}


def test_the_tail_is_the_slowest_share_of_every_page_together():
    http = {page: _samples([(10.0, 9.0, 0.0)] * 19) for page in pages.PAGES}
    http["fleet"] = _samples([(10.0, 9.0, 0.0)] * 19 + [(500.0, 450.0, 400.0)] * 6)
    tail = pages.tail_parts(http, share=0.05)
    assert tail["n"] == 6  # 5 % of 120 samples: the six slow fleet loads
    assert tail["ms_p50"] == 500.0
    assert tail["gc_p50_ms"] == 400.0
    assert tail["outside_p50_ms"] == 50.0


def test_the_slowest_frames_are_split_where_the_channel_layer_delivered_them():
    sent = {f"p{n}": 100.0 + n * 0.01 for n in range(200)}
    relayed = {name: at + 0.02 for name, at in sent.items()}
    relayed["p150"] = sent["p150"] + 0.3  # this one reached the group late
    seen = [{name: at + 0.01 for name, at in relayed.items()}]
    seen[0]["p7"] = relayed["p7"] + 0.4  # and this one went late from Daphne
    lags = [(seen[0]["p7"] - 0.05, 120.0), (seen[0]["p7"] + 0.05, 900.0)]
    ws = pages.ws_latency(sent, seen, warmup=0.0, relayed=relayed, lags=lags)
    assert ws["n"] == 200
    assert ws["p50_ms"] == 30.0
    tail = ws["tail"]
    assert tail["n"] == 2  # the slowest 1 %: p7 (420 ms) and p150 (310 ms)
    assert tail["ms_p50"] == 365.0
    assert tail["layer_p50_ms"] == 160.0  # 20 and 300
    assert tail["daphne_p50_ms"] == 205.0  # 400 and 10
    # p7's subscriber loop was 120 ms late in the 100 ms before it (the 900 came after);
    # p150's was not.
    assert tail["subscriber_lag_p50_ms"] == 60.0
    assert tail["seconds"][2] == 2
    assert "tail" not in pages.ws_latency(sent, seen, warmup=0.0)


def test_the_redis_slow_log_is_summed_per_command_with_the_slowest_kept():
    entries = [
        {"duration": 12_000, "command": b"EVAL local x = 1 0"},
        {"duration": 30_500, "command": b"EVAL local y = 2 0"},
        {"duration": 10_000, "command": b"hget handoff:c:pods uid"},
    ]
    slow = pages.redis_slow(entries)
    assert slow["n"] == 3
    assert slow["total_ms"] == 52.5
    assert slow["max_ms"] == 30.5
    assert slow["by_command_ms"] == {"EVAL": 42.5, "HGET": 10.0}
    assert slow["slowest"][0] == [30.5, "EVAL local y = 2 0"]
    assert pages.redis_slow([])["max_ms"] == 0.0


def _phase(p99_ms: float) -> dict:
    row = {"p50_ms": 10.0, "p99_ms": p99_ms, "errors": 0, "n": 100}
    return {
        **{page: dict(row) for page in pages.PAGES},
        "ws": {"p50_ms": 10.0, "p99_ms": p99_ms, "missing": 0, "subscribers": 10},
        "tail": {"n": 0}, "ingest_events_per_s": 1990, "fed_events_per_s": 2001,
        "pages_per_s": 80.0,
        "cpu_cores": {"redis": 0.2, "worker": 0.3, "machine": 1.4, "steal": 0.1},
    }  # fmt: skip


def test_the_target_is_judged_on_the_people_and_never_on_the_saturated_closed_loop():
    from devtools.bench.results import Results

    section = {
        **_phase(2000.0), "people": {**_phase(120.0), "think_s": [1.0, 5.0]},
        "clients": 50, "seconds": 60.0, "store_pods": 150_000, "store_nodes": 5_000,
        "web_processes": 2,
    }  # fmt: skip
    results = Results(machine={}, command="bench --only pages")
    pages.report_pages(results, section)
    judged = {f.name: f.met for f in results.figures if "ms p99" in f.unit}
    closed = {name: met for name, met in judged.items() if not name.startswith("pages, 50")}
    people = {name: met for name, met in judged.items() if name.startswith("pages, 50")}
    assert len(closed) == len(people) == len(pages.PAGES) + 1  # every page and the websocket
    assert set(closed.values()) == {None}
    assert set(people.values()) == {True}
    assert results.sections["pages"] is section
    # Each phase says how busy the machine was, who used it, and what the host took.
    cores = [f for f in results.figures if f.name == "pages, 50 people: the machine's cores in use"]
    assert cores[0].value == 1.4
    assert "redis 0.2, worker 0.3; stolen by the host 0.1" in cores[0].note
    # Ingest held is read beside what the feeder handed over in the same time.
    held = [f for f in results.figures if f.name == "pages, 50 people: ingest held during the load"]
    assert held[0].met is True
    assert "the feeder handed over 2,001/s in the same time" in held[0].note


def test_what_the_feeder_handed_over_is_counted_in_the_phase_s_own_window():
    # 3 pods a second for 10 s from t=100, then a 2 s stall, then a burst of 12 at once.
    sent = {f"p{n}": 100 + n / 3 for n in range(30)}
    sent |= {f"b{n}": 112.0 for n in range(12)}
    assert pages.fed_rate(sent, 100.0, 110.0) == 3
    assert pages.fed_rate(sent, 110.0, 112.0) == 0  # the feeder starved
    assert pages.fed_rate(sent, 100.0, 113.0) == round(42 / 13)  # and caught up
    assert pages.fed_rate(sent, 120.0, 120.0) == 0


def test_the_machine_s_busy_and_stolen_time_are_read_from_proc_stat(tmp_path):
    import os

    tick = os.sysconf("SC_CLK_TCK")
    stat = tmp_path / "stat"
    # user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  {tick * 3} {tick} {tick * 2} 900 50 0 {tick} {tick * 4} 0 0\ncpu0 1\n")
    assert pages.machine_cpu(str(stat)) == {"machine": 7.0, "steal": 4.0}
    # An older kernel's shorter line has no steal column: none was taken.
    stat.write_text(f"cpu  {tick} 0 {tick} 900\n")
    assert pages.machine_cpu(str(stat)) == {"machine": 2.0, "steal": 0.0}
    assert pages.machine_cpu(str(tmp_path / "missing")) == {"machine": 0.0, "steal": 0.0}


def test_the_people_start_once_the_fold_is_back_within_half_a_second_of_the_feed(redis_client):
    from handoff.live import store

    cluster = "settle"
    events = store.events_key(cluster)
    old = redis_client.xadd(events, {"line": "{}"}, id=f"{int(time.time() * 1000) - 5000}-0")
    redis_client.xadd(events, {"line": "{}"})
    # Nothing folded yet: the oldest entry's wait.
    assert 4.9 < pages.fold_lag(redis_client, cluster) < 7
    redis_client.hset(store.fold_key(cluster), "cursor", old.decode())
    # The fold five seconds behind the feed: it is not settled, and the wait says so.
    assert 4.9 < pages.fold_lag(redis_client, cluster) < 7
    waited = pages.settle(redis_client, cluster, timeout=0.3)
    assert waited["reached"] is False
    assert waited["lag_before_s"] > 4.9
    # The fold at the last entry: no lag, nothing to wait for.
    last = redis_client.xrevrange(events, count=1)[0][0].decode()
    redis_client.hset(store.fold_key(cluster), "cursor", last)
    assert pages.fold_lag(redis_client, cluster) == 0.0
    assert pages.settle(redis_client, cluster, timeout=5)["reached"] is True
