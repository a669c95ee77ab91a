"""The bench's offline-triage section (issue 19 item 7): the whole command for both
formats against the parse floor of the same run, with its split, in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

from devtools import bench
from devtools.bench.triage import run_triage_benchmarks
from tests.offline.triage_outputs import DATA


def test_the_section_reports_both_formats_and_their_split(tmp_path: Path) -> None:
    results = bench.Results(bench.machine(), "test")
    run_triage_benchmarks(results, DATA / "triage" / "scale-200.jsonl.gz", tmp_path, rounds=1)
    section = json.loads(bench.to_json(results))["triage"]

    floor = section["parse_floor"]
    assert floor["cpu_s"] > 0
    assert floor["wall_s"] > 0
    for form in ("json", "table"):
        figures = section[form]
        assert figures["ratio_cpu"] == round(figures["cpu_s"] / floor["cpu_s"], 2)
        assert figures["ratio_wall"] == round(figures["wall_s"] / floor["wall_s"], 2)
        assert figures["ratio_judged"] == figures["ratio_wall"]  # what the user waits for
        split = figures["split_cpu_s"]
        assert set(split) == {"startup", "read_fold", "judge_report", "write"}
        assert all(seconds > 0 for seconds in split.values())
    assert section["judged"] == "wall"
    assert section["workers"] == [1, 1]  # a gzipped trace: one process, each format
    names = [figure.name for figure in results.figures]
    assert names == ["offline triage end to end, json", "offline triage end to end, table"]
    assert (tmp_path / "triage-startup.jsonl").read_bytes().count(b"\n") == 50
    assert section["trace"]["pods"] > 200  # the scale run's 200 pods and the churn's
