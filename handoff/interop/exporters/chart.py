"""A pod's handoff timeline as one standalone HTML file: plotly.js inlined from the installed
``plotly`` package, so it opens anywhere, offline, and can be attached to an incident.

Every string from the cluster is HTML-escaped before Plotly sees it (Plotly renders hover
text and titles as a little HTML), and the figure's JSON has ``<``, ``>`` and ``&`` written as
``\\u003c``-style escapes so nothing in it can close the ``<script>`` it sits in.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from handoff.core import verdicts as v
from handoff.core.trace import parse_time

_STAGES = {stage.name: stage for stage in v.STAGES}


@cache
def plotly_js() -> str:
    """plotly.min.js as the ``plotly`` package ships it (read once per process)."""
    import plotly

    path = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
    return path.read_text(encoding="utf-8")


def _safe_json(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def figure(view: Mapping[str, Any]) -> dict[str, Any]:
    """Plotly data and layout: a bar per stage on a time axis, a marker per event."""
    traces: list[dict[str, Any]] = []
    labels = []
    for stage in view.get("stages") or []:
        if not stage.get("start") or not stage.get("end"):
            continue
        known = _STAGES.get(stage["name"])
        label = known.label if known else stage["name"]
        labels.append(label)
        millis = max(0.0, (parse_time(stage["end"]) - parse_time(stage["start"])) * 1000)
        hover = f"{html.escape(label)}<br>{millis / 1000:.3f} s" + (
            " (open)" if stage.get("open") else ""
        )
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": html.escape(label),
                "y": [html.escape(label)],
                "x": [millis],
                "base": [stage["start"]],
                "marker": {"color": known.colour if known else "#999999"},
                "hovertext": [hover],
                "hoverinfo": "text",
                "showlegend": False,
            }
        )
    events = [e for e in view.get("events") or [] if e.get("first")]
    if events:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "events",
                "y": ["events"] * len(events),
                "x": [e["first"] for e in events],
                "marker": {
                    "size": 10,
                    "symbol": "diamond",
                    "color": [
                        "#d62728" if e.get("type") == "Warning" else "#555555" for e in events
                    ],
                },
                "hovertext": [
                    f"{html.escape(e.get('reason') or '')} x{int(e.get('count') or 1)}<br>"
                    f"{html.escape((e.get('message') or '')[:300])}"
                    for e in events
                ],
                "hoverinfo": "text",
                "showlegend": False,
            }
        )
    verdict = view.get("verdict") or ""
    title = (
        f"{html.escape(view.get('namespace') or '')}/{html.escape(view.get('name') or '')}"
        f" — {html.escape(verdict)}"
        + (f" ({html.escape(view['reason'])})" if view.get("reason") else "")
    )
    layout = {
        "title": {"text": title},
        "barmode": "overlay",
        "xaxis": {"type": "date", "title": {"text": "time (UTC)"}},
        "yaxis": {
            "autorange": "reversed",
            "categoryorder": "array",
            "categoryarray": [*labels, "events"],
        },
        "height": max(260, 48 * (len(labels) + 1) + 120),
        "margin": {"l": 160, "r": 30, "t": 60, "b": 50},
    }
    return {"data": traces, "layout": layout}


def standalone_html(view: Mapping[str, Any], cluster: str) -> str:
    """The whole HTML document (about 4.5 MB, most of it plotly.js)."""
    fig = figure(view)
    name = f"{view.get('namespace')}/{view.get('name')}"
    explanation = html.escape(view.get("explanation") or "")
    verdict = view.get("verdict") or ""
    colour = v.VERDICTS[verdict].colour if verdict in v.VERDICTS else "#666666"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(name)} — Handoff timeline</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1.5rem}"
        ".verdict{display:inline-block;padding:.1rem .5rem;border-radius:.3rem;color:#fff}</style>"
        f"<script>{plotly_js()}</script></head><body>"
        f"<h1>{html.escape(name)}</h1>"
        f'<p>cluster {html.escape(cluster)} · <span class="verdict" style="background:{colour}">'
        f"{html.escape(verdict)}</span> {explanation}</p>"
        '<div id="timeline"></div>'
        f"<script>var figure = {_safe_json(fig)};"
        "Plotly.newPlot('timeline', figure.data, figure.layout,"
        " {responsive: true, displaylogo: false});"
        "</script></body></html>\n"
    )
