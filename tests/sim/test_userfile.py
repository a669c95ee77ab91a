"""User scenarios from YAML files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from handoff.offline.triage import fold_trace
from handoff.sim import Options, find_scenario, run

DATA = Path(__file__).parent / "data"
EXAMPLE = Path(__file__).parents[2] / "handoff" / "sim" / "scenarios" / "examples" / "lab.yaml"


def test_the_documented_example_is_the_tested_one() -> None:
    assert EXAMPLE.read_text() == (DATA / "lab.yaml").read_text()


def test_it_runs_a_yaml_scenario_with_nodes_workloads_and_faults(tmp_path: Path) -> None:
    scenario = find_scenario(None, str(DATA / "lab.yaml"))
    assert scenario.name == "lab"
    assert scenario.duration == 400
    trace = tmp_path / "lab.jsonl"
    run(scenario, Options(seed=1), record=trace)
    verdicts = {p["name"]: p["verdict"] for p in fold_trace(trace)["pods"]}
    assert verdicts["ghost"] == "podgc-deleted"
    assert verdicts["bigcpu"] == "rejected"
    assert verdicts["pinned"] == "evicted"
    assert sum(v == "running" for n, v in verdicts.items() if n.startswith("web-")) >= 3


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("nodes: []", "'nodes' must be a non-empty list"),
        ("nodes: [{cpu: '4'}]", "nodes[0] needs a 'name'"),
        ("nodes: [{name: a, gpu: 1}]", "unknown keys ['gpu']"),
        ("nodes: [{name: a}]\nworkloads: [{pod: {}}]", "workloads[0] needs 'at'"),
        ("nodes: [{name: a}]\nfaults: [{at: 1, node: a, action: explode}]", "unknown action"),
    ],
)
def test_it_explains_what_is_wrong_with_a_file(tmp_path: Path, text: str, complaint: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(complaint)):
        find_scenario(None, str(path))
