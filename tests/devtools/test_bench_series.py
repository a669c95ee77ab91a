"""Pages runs side by side (devtools/bench/series.py): each run judged by what the run
itself judged, the tally, the chart; and the provenance every run's JSON now carries."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from devtools.bench import pages, series
from devtools.bench.results import Results, code_version, to_json
from tests.devtools.test_bench_pages_parts import _phase


def _run(tmp_path: Path, name: str, people_p99: dict[str, float], ingest: int = 1990) -> Path:
    people = {**_phase(120.0), "think_s": [1.0, 5.0], "ingest_events_per_s": ingest}
    for page, p99 in people_p99.items():
        people[page]["p99_ms"] = p99
    section = {
        **_phase(2000.0), "people": people, "clients": 50, "seconds": 60.0,
        "store_pods": 150_000, "store_nodes": 5_000, "web_processes": 2,
    }  # fmt: skip
    results = Results(machine={}, command="bench --only pages", code={"commit": "a" * 40})
    pages.report_pages(results, section)
    path = tmp_path / f"{name}.json"
    path.write_text(to_json(results))
    return path


def test_a_run_is_judged_by_the_figures_it_judged_and_the_tally_counts_every_miss(tmp_path):
    paths = [
        _run(tmp_path, "calm", {"fleet": 180.0}),
        _run(tmp_path, "slow-board", {"board": 301.0, "ws": 250.0}),
        _run(tmp_path, "short-ingest", {}, ingest=1_850),
    ]

    runs = [series.load(path) for path in paths]

    assert [run.met for run in runs] == [True, False, False]
    assert runs[0].worst_page == ("fleet", 180.0)
    assert runs[1].missed == ("pages, 50 people: board",)
    assert runs[1].people_p99_ms["ws"] == 250.0
    assert runs[2].missed == ("pages, 50 people: ingest held during the load",)
    assert runs[2].ingest_per_s == (1990, 1_850)
    assert runs[0].commit == "a" * 12
    text = series.tally(runs)
    assert "Every target met in **1 of 3** runs." in text
    row = next(line for line in text.splitlines() if line.startswith("| slow-board |"))
    assert "| 301 ms (board) | 250 ms | 1,990 / 1,990 per s | 0 | **missed** |" in row
    assert "- short-ingest missed: pages, 50 people: ingest held during the load" in text


def test_anything_but_a_pages_run_is_refused_with_the_file_named(tmp_path, capsys):
    other = tmp_path / "fold.json"
    other.write_bytes(orjson.dumps({"figures": [], "machine": {}}))
    broken = tmp_path / "cut.json"
    broken.write_text('{"pages": {"people"')

    for path in (other, broken):
        with pytest.raises(series.NotAPagesRun, match=str(path)):
            series.load(path)
    assert series.main([str(_run(tmp_path, "fine", {})), str(broken)]) == 2
    assert "cut.json" in capsys.readouterr().err


def test_the_chart_draws_every_run_against_the_target(tmp_path):
    paths = [_run(tmp_path, f"run{k}", {"search": 150.0 + 90 * k}) for k in range(3)]

    assert series.main([*map(str, paths), "--figures", str(tmp_path / "out")]) == 0

    html = tmp_path / "out" / "benchmarks-pages-series.html"
    text = html.read_text()
    assert "target: p99 ≤ 300 ms" in text
    assert "every target met in 2 of 3" in text
    assert "websocket frame" in text
    assert html.with_suffix(".png").stat().st_size > 10_000


def test_a_run_records_when_it_began_and_the_code_it_ran(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
        return done.stdout.strip()

    git("init", "-q")
    (repo / "a.txt").write_text("a")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a")
    head = git("rev-parse", "HEAD")

    assert code_version(repo) == {"commit": head, "dirty": False}
    (repo / "a.txt").write_text("b")
    assert code_version(repo) == {"commit": head, "dirty": True}
    assert code_version(tmp_path / "no-git-here") == {}
    written = orjson.loads(to_json(Results(machine={}, command="c", code=code_version(repo))))
    assert written["code"]["commit"] == head
    assert written["started"].endswith("+00:00")
