"""Runs of the pages bench side by side (issue 19.5).

On two shared cores one run's p99 is a sample: a target holds only if it holds run after
run. This reads the ``--json`` outputs of ``manage.py bench --only pages``, judges each run
by the figures the run itself judged (the bench's own ``met``, nothing re-derived), and
prints a Markdown table and the tally; ``--figures DIR`` draws every run's p99s against the
target as ``DIR/benchmarks-pages-series.html`` and its PNG.

    python -m devtools.bench.series /tmp/runs/*.json --figures docs
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from devtools.bench.pages import PAGES


class NotAPagesRun(ValueError):
    """A file that is not the JSON of a pages run with its people."""


@dataclass(frozen=True)
class PagesRun:
    label: str
    started: str  # UTC; the file's time when the run did not say (written at its end)
    commit: str
    people_p99_ms: dict[str, float | None]  # each page and "ws", the 50 people's
    errors: int
    ingest_per_s: tuple[int, int]  # held during the closed loop, during the people
    missed: tuple[str, ...]  # the judged figures the run did not meet

    @property
    def met(self) -> bool:
        return not self.missed

    @property
    def worst_page(self) -> tuple[str, float]:
        """The slowest page by p99 (the websocket apart)."""
        p99s = {page: self.people_p99_ms[page] or float("inf") for page in PAGES}
        page = max(p99s, key=p99s.__getitem__)
        return page, p99s[page]


def load(path: Path) -> PagesRun:
    try:
        data = orjson.loads(path.read_bytes())
        people = data["pages"]["people"]
        closed = data["pages"]
        judged = [f for f in data["figures"] if f.get("met") is not None]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise NotAPagesRun(
            f"{path}: not the JSON of a pages run with its 50 people "
            f"(`python manage.py bench --only pages --json FILE`): {exc!r}"
        ) from exc
    if not judged:
        raise NotAPagesRun(f"{path}: the run judged no figure against a target")
    code = data.get("code") or {}
    commit = code.get("commit", "")[:12] + ("+changes" if code.get("dirty") else "")
    return PagesRun(
        label=path.stem,
        started=data.get("started") or _file_time(path),
        commit=commit,
        people_p99_ms={page: people[page]["p99_ms"] for page in (*PAGES, "ws")},
        errors=sum(phase[page]["errors"] for phase in (closed, people) for page in PAGES),
        ingest_per_s=(closed["ingest_events_per_s"], people["ingest_events_per_s"]),
        missed=tuple(f["name"] for f in judged if not f["met"]),
    )


def _file_time(path: Path) -> str:
    written = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return written.isoformat(timespec="seconds") + " (file written)"


def tally(runs: list[PagesRun]) -> str:
    """The runs as a Markdown table, then how many met every target and which missed."""
    rows = [
        "| run | started (UTC) | commit | worst page p99 | websocket p99 "
        "| ingest held, closed / people | errors | every target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        page, p99 = run.worst_page
        ws = run.people_p99_ms["ws"]
        rows.append(
            f"| {run.label} | {run.started} | {run.commit or '—'} | {_ms(p99)} ({page}) "
            f"| {_ms(ws)} | {run.ingest_per_s[0]:,} / {run.ingest_per_s[1]:,} per s "
            f"| {run.errors} | {'met' if run.met else '**missed**'} |"
        )
    met = sum(run.met for run in runs)
    lines = ["\n".join(rows), "", f"Every target met in **{met} of {len(runs)}** runs."]
    lines += [f"- {run.label} missed: {'; '.join(run.missed)}" for run in runs if not run.met]
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "—" if value is None or value == float("inf") else f"{value:,.0f} ms"


def figure(runs: list[PagesRun]) -> Any:
    """Every run's p99 per page and the websocket's, run by run, against the target."""
    import plotly.graph_objects as go

    from devtools.bench.figures import p99_target

    labels = [run.label for run in runs]
    fig = go.Figure()
    for name in (*PAGES, "ws"):
        fig.add_trace(
            go.Scatter(
                x=labels,
                y=[run.people_p99_ms[name] for run in runs],
                mode="markers",
                marker={"symbol": "diamond" if name == "ws" else "circle", "size": 9},
                name=name if name != "ws" else "websocket frame",
            )
        )
    fig.add_trace(p99_target(go, labels))
    met = sum(run.met for run in runs)
    fig.update_layout(
        title=f"The pages bench run by run, 50 people: every target met in {met} of {len(runs)}",
        xaxis_title="run",
        yaxis_title="p99, ms",
        yaxis_rangemode="tozero",
    )
    return fig


def write_figure(runs: list[PagesRun], out_dir: Path) -> list[Path]:
    from devtools.bench.figures import screenshots

    out_dir.mkdir(parents=True, exist_ok=True)
    html = out_dir / "benchmarks-pages-series.html"
    figure(runs).write_html(html, include_plotlyjs="directory", full_html=True)
    return [html, *screenshots([html])]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.bench.series", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("runs", nargs="+", type=Path, help="pages runs' JSON, in run order")
    parser.add_argument("--figures", type=Path, help="also draw the runs here (HTML and PNG)")
    args = parser.parse_args(argv)
    try:
        runs = [load(path) for path in args.runs]
    except NotAPagesRun as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(tally(runs))
    if args.figures:
        for path in write_figure(runs, args.figures):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
