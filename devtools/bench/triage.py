"""Offline triage end to end (issue 19 item 7): ``manage.py triage --trace`` as a user runs
it, start-up and report included, for the JSON and the table, against the parse floor
measured in the same run; and where its time goes (start-up, read + fold, judge/report,
write — the stages of the one-process path, ``devtools.triagesplit``).

A large trace is triaged by several processes (``handoff.offline.fanout``), which trades
CPU for wall time: the target is judged on **wall** time, what the user waits for; the
CPU of all processes (the workers included: ``wait4`` counts the children a process
waited for) is reported beside it. On a shared machine wall time also measures the
neighbours: quote the load average with it. Rounds alternate floor, start-up, both
formats and both splits, and each figure is the median of its rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import orjson

from devtools.bench.fold import count_lines
from devtools.bench.results import Figure, Results
from handoff.core.trace import open_binary
from handoff.offline.fanout import workers_for

FORMATS = ("json", "table")
TARGET = 2.5  # times the parse floor, whole command
JUDGED = "wall"  # the ratio the target is judged on (the JSON's "judged")
STARTUP_LINES = 50  # the start-up trace: the first lines of the trace, a fold of nothing


def parse_floor_times(path: Path) -> tuple[float, float]:
    """(CPU, wall) seconds to read and orjson-parse every line: nothing can fold faster."""
    cpu, wall = time.process_time(), time.perf_counter()
    with open_binary(path) as stream:
        for line in stream:
            orjson.loads(line)
    return time.process_time() - cpu, time.perf_counter() - wall


def command_times(argv: list[str]) -> tuple[float, float, float]:
    """(CPU, wall, peak RSS MiB) of a command run to completion, its output discarded; CPU
    and RSS from ``wait4``, which include the children the command waited for."""
    wall = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - wall
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime, seconds, usage.ru_maxrss / 1024


def triage_argv(path: Path, form: str) -> list[str]:
    return [sys.executable, "manage.py", "triage", "--trace", str(path), "--format", form]


def stage_split(path: Path, form: str) -> dict[str, float]:
    """CPU seconds of read + fold, judge/report and write (``devtools.triagesplit``)."""
    out = subprocess.run(
        [sys.executable, "-m", "devtools.triagesplit", str(path), form],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


def startup_trace(path: Path, workdir: Path) -> Path:
    """The trace's first lines: ``manage.py triage`` of it is the command's start-up."""
    tiny = workdir / "triage-startup.jsonl"
    with open_binary(path) as stream, open(tiny, "wb") as out:
        for number, line in enumerate(stream):
            if number >= STARTUP_LINES:
                break
            out.write(line)
    return tiny


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 3)


def measure(path: Path, workdir: Path, rounds: int) -> dict[str, object]:
    """Every sample of ``rounds`` alternating rounds, reduced to medians."""
    tiny = startup_trace(path, workdir)
    section_trace: dict[str, int] = {}
    floor_cpu: list[float] = []
    floor_wall: list[float] = []
    startup: list[float] = []
    workers: list[int] = []  # the processes a triage of the trace took, run by run
    runs: dict[str, dict[str, list[float]]] = {
        form: {"cpu": [], "wall": [], "rss": [], "read_fold": [], "judge_report": [], "write": []}
        for form in FORMATS
    }
    for _ in range(rounds):
        cpu, wall = parse_floor_times(path)
        floor_cpu.append(cpu)
        floor_wall.append(wall)
        startup.append(command_times(triage_argv(tiny, "json"))[0])
        for form in FORMATS:
            workers.append(workers_for(path))  # as the command decides, a moment later
            cpu, wall, rss = command_times(triage_argv(path, form))
            samples = runs[form]
            samples["cpu"].append(cpu)
            samples["wall"].append(wall)
            samples["rss"].append(rss)
            split = stage_split(path, form)
            section_trace = {"pods": split.pop("pods"), "events": split.pop("events")}
            for stage, seconds in split.items():
                samples[stage].append(seconds)
    floor = {"cpu_s": _median(floor_cpu), "wall_s": _median(floor_wall)}
    section: dict[str, object] = {
        "trace": {"path": str(path), **section_trace},
        "rounds": rounds,
        "workers": workers,
        "judged": JUDGED,
        "parse_floor": floor,
    }
    for form in FORMATS:
        samples = runs[form]
        cpu, wall = _median(samples["cpu"]), _median(samples["wall"])
        section[form] = {
            "cpu_s": cpu,
            "wall_s": wall,
            "ratio_cpu": round(cpu / floor["cpu_s"], 2),
            "ratio_wall": round(wall / floor["wall_s"], 2),
            "ratio_judged": round((wall if JUDGED == "wall" else cpu) / floor[f"{JUDGED}_s"], 2),
            "peak_rss_mib": round(max(samples["rss"])),
            "split_cpu_s": {
                "startup": _median(startup),
                "read_fold": _median(samples["read_fold"]),
                "judge_report": _median(samples["judge_report"]),
                "write": _median(samples["write"]),
            },
        }
    return section


def run_triage_benchmarks(results: Results, path: Path, workdir: Path, rounds: int) -> None:
    section = measure(path, workdir, rounds)
    results.sections["triage"] = section
    if not results.trace.get("lines"):  # the section run alone, on a given trace
        results.trace.update(section["trace"])  # type: ignore[arg-type]
        results.trace["lines"] = count_lines(path)
    floor = section["parse_floor"]
    assert isinstance(floor, dict)
    for form in FORMATS:
        figures = section[form]
        assert isinstance(figures, dict)
        split = figures["split_cpu_s"]
        results.add(
            Figure(
                f"offline triage end to end, {form}",
                figures["ratio_judged"],
                f"x parse floor ({JUDGED})",
                f"parse floor, {JUDGED} s",
                floor[f"{JUDGED}_s"],
                figures["ratio_judged"],
                f"≤ {TARGET}x the parse floor",
                figures["ratio_judged"] <= TARGET,
                f"{figures['wall_s']} s wall ({figures['ratio_wall']}x the floor's "
                f"{floor['wall_s']} s), {figures['cpu_s']} s CPU of all processes "
                f"({figures['ratio_cpu']}x the floor's {floor['cpu_s']} s); "
                f"worker processes by run {section['workers']}; one-process split: start-up "
                f"{split['startup']} s, read + fold {split['read_fold']} s, judge/report "
                f"{split['judge_report']} s, write {split['write']} s; median of {rounds}",
            )
        )
