"""The pages section's chart: p50 and p99 per page against the 300 ms target, as HTML and
a PNG taken by headless Chromium."""

from __future__ import annotations

from pathlib import Path

from devtools.bench.figures import write_figures
from devtools.bench.results import Results


def _row(p50: float, p99: float) -> dict:
    return {"p50_ms": p50, "p99_ms": p99, "errors": 0, "n": 100}


def test_the_pages_section_gets_a_chart_with_its_target(tmp_path: Path) -> None:
    pages = {name: _row(40.0 + i, 120.0 + 10 * i) for i, name in enumerate(("board", "fleet"))}
    pages |= {"ws": _row(30.0, 90.0), "ingest_events_per_s": 1990, "store_pods": 150_000}
    results = Results(machine={}, command="bench --only pages", sections={"pages": pages})

    written = write_figures(results, tmp_path)

    html = tmp_path / "benchmarks-pages.html"
    assert html in written
    assert (tmp_path / "benchmarks-pages.png") in written
    text = html.read_text()
    assert "target: p99 ≤ 300 ms" in text
    for name in ("board", "fleet", "ws"):
        assert f'"{name}"' in text
    assert "ingest_events_per_s" not in text  # figures only, not the section's counters
    assert (tmp_path / "benchmarks-pages.png").stat().st_size > 10_000


def test_the_chart_shows_the_people_beside_the_closed_loop(tmp_path: Path) -> None:
    pages = {name: _row(900.0, 3000.0) for name in ("board", "fleet")}
    pages |= {"ws": _row(30.0, 90.0), "store_pods": 150_000}
    pages["people"] = {"board": _row(80.0, 250.0), "fleet": _row(90.0, 280.0), "ws": _row(1, 2)}
    results = Results(machine={}, command="bench --only pages", sections={"pages": pages})

    write_figures(results, tmp_path)

    text = (tmp_path / "benchmarks-pages.html").read_text()
    assert "closed loop p99" in text
    assert "people p99" in text
