"""What a benchmark run produced: figures, the machine they ran on, Markdown and JSON."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""


@dataclass
class Results:
    machine: dict[str, Any]
    command: str
    trace: dict[str, Any] = field(default_factory=dict)
    figures: list[Figure] = field(default_factory=list)
    # Curves for the figures: name -> points (throughput vs trace size, latency vs rate).
    series: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # A section's own figures as nested JSON, at the top level of the JSON (e.g. "pages").
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        return figure


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model or platform.processor(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def markdown(results: Results) -> str:
    rows = [
        "| figure | value | baseline | ratio | target | met | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in results.figures:
        baseline = f"{f.baseline}: {f.baseline_value:,}" if f.baseline_value is not None else ""
        met = "" if f.met is None else ("yes" if f.met else "**no**")
        ratio = "" if f.ratio is None else f"{f.ratio}x"
        rows.append(
            f"| {f.name} | {f.value:,} {f.unit} | {baseline} | {ratio} | {f.target} | {met} "
            f"| {f.note} |"
        )
    m = results.machine
    head = (
        f"Machine: {m['cores']} cores, {m['cpu']}, Python {m['python']}.  \n"
        f"Command: `{results.command}`.  \n"
        f"Trace: {results.trace.get('lines', 0):,} events, {results.trace.get('pods', 0):,} pods."
    )
    return head + "\n\n" + "\n".join(rows) + "\n"


def to_json(results: Results) -> str:
    data = asdict(results)
    data.update(data.pop("sections"))
    return json.dumps(data, indent=2)
