"""What a benchmark run produced: figures, the machine they ran on, Markdown and JSON."""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


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
    # When the run began (UTC) and the code it ran: a series of runs is read by them.
    started: str = field(default_factory=utc_now)
    code: dict[str, Any] = field(default_factory=dict)

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


def code_version(root: Path | None = None) -> dict[str, Any]:
    """The commit the run's code is at and whether the tree had changes beside it; empty
    outside a git checkout (a copied tree, no git)."""
    root = root or Path(__file__).resolve().parents[2]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError):
        return {}


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
        f"Command: `{results.command}`, started {results.started}{_at(results.code)}.  \n"
        f"Trace: {results.trace.get('lines', 0):,} events, {results.trace.get('pods', 0):,} pods."
    )
    return head + "\n\n" + "\n".join(rows) + "\n"


def _at(code: dict[str, Any]) -> str:
    if not code:
        return ""
    return f" at {code['commit'][:12]}" + (" with uncommitted changes" if code["dirty"] else "")


def to_json(results: Results) -> str:
    data = asdict(results)
    data.update(data.pop("sections"))
    return json.dumps(data, indent=2)
