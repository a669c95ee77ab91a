"""What ``manage.py fidelity`` calls a difference, on hand-made traces (no control plane):
the watch updates of a deletion, the recorder an event came through, deletion times
beyond the tolerance, and a Deployment's pods matched across runs despite their hashes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from devtools.fidelity.compare import as_text, compare
from devtools.fidelity.runs import Recorded
from devtools.fidelity.situations import situations
from handoff.core.trace import TraceWriter, format_time

T0 = 1_800_000_000.0


def stamp(t: float) -> str:
    return format_time(T0 + t)[:19] + "Z"


def pod(name: str, uid: str, *, node: str = "", deletion: float | None = None, owner: str = ""):
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": uid,
        "creationTimestamp": stamp(0),
    }
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "controller": True}]
    if deletion is not None:
        meta["deletionTimestamp"] = stamp(deletion)
        meta["deletionGracePeriodSeconds"] = 0
    spec = {"nodeName": node} if node else {}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": {}}


def scheduled(uid: str, name: str, *, new_recorder: bool) -> dict[str, Any]:
    event = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": f"{name}.1", "namespace": "default", "uid": f"e-{uid}"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": name, "uid": uid},
        "type": "Normal",
        "reason": "Scheduled",
        "message": f"Successfully assigned default/{name} to w-1",
    }
    if new_recorder:
        event.update(source={}, reportingComponent="default-scheduler")
    else:
        event.update(source={"component": "default-scheduler"}, reportingComponent="")
    return event


def write(path: Path, lines: list[tuple[float, str, dict[str, Any]]]) -> Recorded:
    with TraceWriter(path) as trace:
        for t, type_, obj in lines:
            trace.write(format_time(T0 + t), type_, obj)
    return Recorded(path, T0, T0 + 120)


def diff(tmp_path: Path, sim: list, real: list, tolerance: float = 20.0) -> dict[str, list]:
    compared = compare(
        situations(write(tmp_path / "sim.jsonl", sim), 60.0),
        situations(write(tmp_path / "real.jsonl", real), 60.0),
        tolerance,
    )
    return {c.key: [d.fact for d in c.differences] for c in compared}


def test_a_deleted_without_the_modified_before_it_is_a_difference(tmp_path: Path) -> None:
    sim = [(1, "ADDED", pod("a", "s", node="gone")), (50, "DELETED", pod("a", "s", node="gone"))]
    real = [
        (1, "ADDED", pod("a", "r", node="gone")),
        (55, "MODIFIED", pod("a", "r", node="gone", deletion=55)),
        (55.1, "DELETED", pod("a", "r", node="gone", deletion=55)),
    ]
    found = diff(tmp_path, sim, real)
    assert "updates" in found["default/a"]
    assert "deletion_asked" in found["default/a"]  # never asked in the simulator's run
    assert "deleted" not in found["default/a"]  # 50 s and 55 s: within 20 s


def test_an_event_through_the_other_recorder_is_a_difference(tmp_path: Path) -> None:
    sim = [(1, "ADDED", pod("b", "s")), (1.1, "ADDED", scheduled("s", "b", new_recorder=False))]
    real = [(1, "ADDED", pod("b", "r")), (1.1, "ADDED", scheduled("r", "b", new_recorder=True))]
    found = diff(tmp_path, sim, real)
    assert found["default/b"] == ["events"]


def test_an_event_observed_before_its_pod_counts_for_it(tmp_path: Path) -> None:
    """Events and pods are separate watches: on a loaded machine the scheduler's event
    can be observed before the pod's ADDED; it is the same run as the other order."""
    sim = [(1, "ADDED", pod("e", "s")), (1.1, "ADDED", scheduled("s", "e", new_recorder=True))]
    real = [(1, "ADDED", scheduled("r", "e", new_recorder=True)), (1.1, "ADDED", pod("e", "r"))]
    assert diff(tmp_path, sim, real) == {"default/e": []}


def test_deletion_times_differ_beyond_the_tolerance_only(tmp_path: Path) -> None:
    def run(at: float) -> list:
        return [
            (1, "ADDED", pod("c", f"u{at}")),
            (at, "MODIFIED", pod("c", f"u{at}", deletion=at)),
            (at + 0.1, "DELETED", pod("c", f"u{at}", deletion=at)),
        ]

    assert diff(tmp_path, run(50), run(65))["default/c"] == []
    assert diff(tmp_path, run(50), run(80))["default/c"] == ["deletion_asked", "deleted"]


def test_a_deployments_pods_are_matched_by_creation_order(tmp_path: Path) -> None:
    sim = [
        (1, "ADDED", pod("web-5d8f7c9b6-abcde", "s1", owner="web-5d8f7c9b6")),
        (1.2, "ADDED", pod("web-5d8f7c9b6-fghjk", "s2", owner="web-5d8f7c9b6")),
    ]
    real = [
        (1, "ADDED", pod("web-7c4b9d6f8-qwxyz", "r1", owner="web-7c4b9d6f8")),
        (1.3, "ADDED", pod("web-7c4b9d6f8-mnbvc", "r2", owner="web-7c4b9d6f8")),
        (2, "ADDED", pod("extra", "r3")),
    ]
    compared = compare(
        situations(write(tmp_path / "sim.jsonl", sim), 60.0),
        situations(write(tmp_path / "real.jsonl", real), 60.0),
        20.0,
    )
    text = as_text(compared)
    assert "default/web#1: identical" in text
    assert "default/web#2: identical" in text
    assert "  present: simulator False, real True" in text
    assert text[-1] == "3 situations, 2 identical"


def test_objects_made_before_the_run_are_not_its_situations(tmp_path: Path) -> None:
    old = pod("old", "o")
    old["metadata"]["creationTimestamp"] = stamp(-3600)
    found = diff(
        tmp_path, [(1, "ADDED", pod("d", "s"))], [(0, "ADDED", old), (1, "ADDED", pod("d", "r"))]
    )
    assert found == {"default/d": []}


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--kubeconfig", "{bad}"], "not a usable kubeconfig"),
        (["--kubeconfig", "{none}"], "no such file"),
        (["--scenario", "steady"], "runs until stopped"),
        (["--context", "x"], "--context needs --kubeconfig"),
        (["--k8s-version", "one"], "--k8s-version"),
        ([], "HANDOFF_K8S_ASSETS"),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], said: str
) -> None:
    """Before anything runs (no control plane is started: no binaries are named)."""
    monkeypatch.setenv("HANDOFF_K8S_ASSETS", "")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", "")
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("clusters: [")
    paths = {"bad": bad, "none": tmp_path / "none"}
    with pytest.raises(CommandError) as raised:
        call_command("fidelity", *[a.format(**paths) for a in args])
    assert said in str(raised.value)
    assert "\n" not in str(raised.value)
