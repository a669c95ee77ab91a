"""Every scripted trace in tests/data/traces, written from HANDOFF_FACTS.md
independently of the engine, gets the verdicts a Kubernetes operator expects."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from handoff.offline.triage import fold_trace

TRACES = Path(__file__).parents[1] / "data" / "traces"
EXPECTED = json.loads((TRACES / "expected.json").read_text())


@cache
def _report(name: str) -> dict:
    spec = EXPECTED[name]
    return fold_trace(TRACES / name, at=spec.get("at"), stuck_after=spec.get("stuck_after", 60))


def _cases():
    for name, spec in sorted(EXPECTED.items()):
        for key, pod in sorted(spec["pods"].items()):
            yield pytest.param(name, key, pod, id=f"{Path(name).stem}:{key}")


def _find(report: dict, key: str, uid: str | None) -> dict:
    """``ns/name``, or ``ns/name@uid`` where a name was used by several pods."""
    namespace, name = key.split("@", 1)[0].split("/", 1)
    found = [p for p in report["pods"] if (p["namespace"], p["name"]) == (namespace, name)]
    if uid is not None:
        found = [p for p in found if p["uid"] == uid]
    assert len(found) == 1, f"{key}: {len(found)} pods in the report"
    return found[0]


@pytest.mark.parametrize(("trace", "key", "expected"), list(_cases()))
def test_it_gives_the_expected_verdict(trace, key, expected):
    pod = _find(_report(trace), key, expected.get("uid"))

    assert pod["verdict"] == expected["verdict"], pod["explanation"]
    if "reason" in expected:
        assert pod["reason"] == expected["reason"]
    if "binding" in expected:
        assert pod["binding"] == expected["binding"]
    if "node" in expected:
        assert pod["node"] == expected["node"]
    for milestone, when in expected.get("milestones", {}).items():
        assert pod["milestones"][milestone] == when, milestone


def test_every_trace_file_has_expectations():
    assert {p.name for p in TRACES.glob("*.jsonl")} == set(EXPECTED)


def test_every_verdict_and_binding_is_covered():
    verdicts = {p["verdict"] for spec in EXPECTED.values() for p in spec["pods"].values()}
    bindings = {p.get("binding") for spec in EXPECTED.values() for p in spec["pods"].values()}

    assert verdicts == {
        "unscheduled", "awaiting-kubelet", "starting", "running", "succeeded", "stuck",
        "stuck-terminating", "rejected", "podgc-deleted", "evicted", "node-lost", "failed",
        "deleted",
    }  # fmt: skip
    assert bindings >= {"scheduler", "manual", "static", "unknown"}
