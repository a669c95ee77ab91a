"""The benchmark figures as a Plotly page and PNG screenshots."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from devtools.bench.results import Results


def write_figures(results: Results, out_dir: Path, stem: str = "benchmarks") -> list[Path]:
    """Plotly figures of the curves, as HTML (plotly.js once, beside them) and PNG (the
    HTML rendered by headless Chromium: nothing to download)."""
    import plotly.graph_objects as go

    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    ingest_points = results.series.get("ingest throughput")
    if ingest_points:
        fig = go.Figure(
            go.Scatter(
                x=[p["events"] for p in ingest_points],
                y=[p["events_per_s"] for p in ingest_points],
                mode="lines+markers",
                name="fold worker (stream → views, indexes, push)",
            )
        )
        fig.add_hline(y=20_000, line_dash="dash", annotation_text="target 20k events/s")
        fig.update_layout(
            title="Ingest throughput vs events folded so far (one worker process)",
            xaxis_title="events folded",
            yaxis_title="events/s (cumulative)",
        )
        figures["throughput"] = fig
    latency_rows = results.series.get("live latency")
    if latency_rows:
        fig = go.Figure()
        rates = [row["rate"] for row in latency_rows]
        for path, label in (("websocket", "→ websocket frame"), ("group", "→ Channels group")):
            for q, dash in (("p50_ms", "dot"), ("p99_ms", "solid")):
                fig.add_trace(
                    go.Scatter(
                        x=rates,
                        y=[row[path][q] for row in latency_rows],
                        mode="lines+markers",
                        line_dash=dash,
                        name=f"{label} {q[:3]}",
                    )
                )
        # Targets as traces: add_hline misplaces lines on a log axis.
        for y, label in (
            (250, "target: websocket p99 at 5k/s"),
            (100, "target: group p99 at 2k/s"),
        ):
            fig.add_trace(
                go.Scatter(
                    x=[min(rates), max(rates)],
                    y=[y, y],
                    mode="lines",
                    line={"dash": "dash", "color": "black", "width": 1},
                    name=label,
                )
            )
        fig.update_layout(
            title="Live latency: watch event observed → delivered",
            xaxis_title="events/s (each a new pod)",
            yaxis_title="ms (log scale)",
            yaxis_type="log",
        )
        figures["latency"] = fig
    pages = results.sections.get("pages")
    if pages:
        figures["pages"] = _pages_figure(go, pages)
    written = []
    for name, fig in figures.items():
        html = out_dir / f"{stem}-{name}.html"
        fig.write_html(html, include_plotlyjs="directory", full_html=True)
        written.append(html)
    if written:
        written += screenshots(written)
    return written


def _pages_figure(go: Any, pages: dict[str, Any]) -> Any:
    """p50 and p99 per page under the concurrent load, against the 300 ms p99 target: the
    closed loop's and, when the run has them, the people's (the ones the target judges)."""
    names = [name for name, row in pages.items() if isinstance(row, dict) and "p99_ms" in row]
    people = pages.get("people") or {}
    closed = "closed loop " if people else ""
    fig = go.Figure()
    for q, label in (("p50_ms", "p50"), ("p99_ms", "p99")):
        fig.add_trace(go.Bar(x=names, y=[pages[n][q] for n in names], name=closed + label))
    for q, label in (("p50_ms", "people p50"), ("p99_ms", "people p99")):
        if people:
            values = [(people.get(n) or {}).get(q) for n in names]
            fig.add_trace(go.Bar(x=names, y=values, name=label))
    fig.add_trace(p99_target(go, names))
    fig.update_layout(
        title=(
            f"Pages under load: {pages.get('store_pods', 0):,} pods, "
            f"{pages.get('clients', 0)} clients, ingest {pages.get('ingest_events_per_s', 0):,}/s"
        ),
        xaxis_title="page (ws: websocket frame after the pod was fed)",
        yaxis_title="ms (log scale)",
        yaxis_type="log",
        barmode="group",
    )
    return fig


def p99_target(go: Any, xs: list[str]) -> Any:
    """The pages' 300 ms p99 target, a dashed line across ``xs``."""
    from devtools.bench.pages import P99_TARGET_MS

    return go.Scatter(
        x=xs,
        y=[P99_TARGET_MS] * len(xs),
        mode="lines",
        line={"dash": "dash", "color": "black", "width": 1},
        name=f"target: p99 ≤ {P99_TARGET_MS:.0f} ms",
    )


def screenshots(pages: list[Path]) -> list[Path]:
    """PNGs of the pages, taken in a thread of its own: Playwright's sync API refuses a
    thread that already drives a browser (a test session's, or a caller's)."""
    out: list[Path] = []
    errors: list[BaseException] = []

    def take() -> None:
        try:
            out.extend(_take_screenshots(pages))
        except BaseException as error:  # handed to the caller's thread
            errors.append(error)

    worker = threading.Thread(target=take, name="bench-screenshots")
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return out


def _take_screenshots(pages: list[Path]) -> list[Path]:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    out = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 600})
        for html in pages:
            page.goto(html.resolve().as_uri())
            page.wait_for_selector(".main-svg")
            png = html.with_suffix(".png")
            page.screenshot(path=str(png))
            out.append(png)
        browser.close()
    return out
