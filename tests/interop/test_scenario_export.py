"""A recorded incident exported as a simulator scenario runs again to the same verdicts."""

from __future__ import annotations

import io

import pytest
import yaml
from django.core.management import call_command

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.interop.importers import open_events
from handoff.sim.runner import find_scenario, run
from handoff.sim.scenarios import Options


def _verdicts(path) -> dict[str, tuple[str, str | None]]:
    report = build_report(fold(open_events(path)))
    return {f"{p['namespace']}/{p['name']}": (p["verdict"], p["reason"]) for p in report["pods"]}


def _round_trip(tmp_path, scenario: str, seed: int):
    original = tmp_path / "original.jsonl"
    run(find_scenario(scenario, None), Options(seed=seed), record=original)
    exported = tmp_path / "again.yaml"
    out = io.StringIO()
    call_command("export-scenario", "--trace", str(original), "--out", str(exported), stdout=out)
    again = tmp_path / "again.jsonl"
    run(find_scenario(None, str(exported)), Options(seed=seed + 1), record=again)
    return _verdicts(original), _verdicts(again), yaml.safe_load(exported.read_text())


def test_it_runs_manual_scheduling_again_to_the_same_verdicts(tmp_path):
    before, after, scenario = _round_trip(tmp_path, "manual-scheduling", 1)

    assert after == before
    assert scenario["cluster"]["control_plane"] is True
    pinned = next(
        w["pod"]
        for w in scenario["workloads"]
        if w.get("pod", {}).get("metadata", {}).get("name") == "pinned"
    )
    assert pinned["spec"]["nodeName"] == "worker-2"  # created bound: kept
    plain = next(
        w["pod"]
        for w in scenario["workloads"]
        if w.get("pod", {}).get("metadata", {}).get("name") == "plain"
    )
    assert "nodeName" not in plain["spec"]  # the scheduler bound it: left to the scheduler


def test_it_turns_node_trouble_into_faults(tmp_path):
    before, after, scenario = _round_trip(tmp_path, "handoff-failures", 1)
    actions = {(f["node"], f["action"]) for f in scenario["faults"]}

    assert {("worker-3", "delete"), ("worker-5", "delete"), ("worker-4", "hang")} <= actions
    # The racer/hog admission race depends on a binding in flight: the scheduler's timing
    # decides which of the two the kubelet refuses, so only the outcome's shape is kept.
    race = {"default/racer", "default/hog"}
    assert {k: v for k, v in after.items() if k not in race} == {
        k: v for k, v in before.items() if k not in race
    }
    assert sorted(after[name] for name in race) == sorted(before[name] for name in race)


@pytest.mark.parametrize("junk", [b"", b"garbage\n"])
def test_it_exits_2_on_a_trace_without_events(tmp_path, junk):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(junk)

    with pytest.raises(SystemExit) as exit_:
        call_command(
            "export-scenario",
            "--trace",
            str(path),
            "--out",
            str(tmp_path / "x.yaml"),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )

    assert exit_.value.code == 2
