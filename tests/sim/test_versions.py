"""``simulate --k8s-version``: the same scenarios as 1.20, 1.25, 1.27, 1.29 and the newest
release shape them (handoff/sim/versions.py), and the fold reaches the same verdicts where
the situation is the same."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from handoff.offline.triage import fold_trace
from handoff.sim import Options, find_scenario, run
from handoff.sim.versions import NEWEST

VERSIONS = ("1.20", "1.25", "1.27", "1.29", NEWEST)


def _record(tmp_path: Path, version: str) -> Path:
    path = tmp_path / f"ms-{version}.jsonl"
    run(find_scenario("manual-scheduling", None), Options(seed=1, k8s_version=version), record=path)
    return path


def _lines(path: Path) -> list[dict]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()[1:]]


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("versions")
    return {version: _record(folder, version) for version in VERSIONS}


def test_the_fold_gives_the_same_verdicts_on_every_version(traces: dict[str, Path]) -> None:
    verdicts = {
        version: {
            p["name"]: (p["verdict"], p.get("reason"), p.get("binding"))
            for p in fold_trace(path)["pods"]
        }
        for version, path in traces.items()
    }
    newest = verdicts[NEWEST]
    assert newest["bigcpu"][:2] == ("rejected", "OutOfcpu")
    assert newest["ghost3"][0] == "podgc-deleted"
    for version in VERSIONS:
        expected = dict(newest)
        if version in ("1.20", "1.25"):
            # No DisruptionTarget before 1.26: the taint manager's event names the eviction.
            expected["pinned-tainted"] = ("evicted", "TaintManagerEviction", "manual")
        assert verdicts[version] == expected, version
    assert newest["pinned-tainted"] == ("evicted", "DeletionByTaintManager", "manual")


def _pod_statuses(path: Path, name: str) -> list[dict]:
    return [
        line["object"]["status"]
        for line in _lines(path)
        if line["object"].get("kind") == "Pod" and line["object"]["metadata"].get("name") == name
    ]


def test_rejections_follow_the_kubelet_of_each_version(traces: dict[str, Path]) -> None:
    """pkg/kubelet/kubelet.go rejectPod: "Pod " + m before 1.26, "Pod was rejected: " after;
    the predicate's description from 1.31 (pkg/kubelet/lifecycle/predicate.go)."""
    old = _pod_statuses(traces["1.20"], "badsel")[-1]
    new = _pod_statuses(traces[NEWEST], "badsel")[-1]
    assert old["message"] == "Pod Predicate NodeAffinity failed"
    assert new["message"] == (
        "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
        "affinity/selector"
    )


@pytest.mark.parametrize(("version", "written"), [("1.27", False), ("1.29", True)])
def test_the_sandbox_condition_comes_with_1_29(
    traces: dict[str, Path], version: str, written: bool
) -> None:
    types = {
        c["type"]
        for s in _pod_statuses(traces[version], "pinned")
        for c in s.get("conditions") or ()
    }
    assert ("PodReadyToStartContainers" in types) is written


@pytest.mark.parametrize(("version", "marked"), [("1.25", False), ("1.27", True)])
def test_podgc_marks_failed_with_disruption_target_only_from_1_26(
    traces: dict[str, Path], version: str, marked: bool
) -> None:
    """pkg/controller/podgc/gc_controller.go: markFailedAndDeletePodWithCondition (1.26+)."""
    last = _pod_statuses(traces[version], "ghost3")[-1]
    assert (last["phase"] == "Failed") is marked
    reasons = {c.get("reason") for c in last.get("conditions") or ()}
    assert ("DeletionByPodGC" in reasons) is marked


@pytest.mark.parametrize(
    ("version", "component"), [("1.27", "taint-controller"), ("1.29", "taint-eviction-controller")]
)
def test_the_taint_managers_name_follows_the_version(
    traces: dict[str, Path], version: str, component: str
) -> None:
    sources = {
        (line["object"].get("source") or {}).get("component")
        for line in _lines(traces[version])
        if line["object"].get("reason") == "TaintManagerEviction"
    }
    assert sources == {component}


def test_every_pod_deletion_is_a_modified_with_deletion_timestamp_then_deleted(
    traces: dict[str, Path],
) -> None:
    """staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go
    updateForGracefulDeletionAndFinalizers: grace 0 too (PodGC, the kubelet's final delete,
    unbound and terminal pods) goes through a MODIFIED first (FIDELITY_AUDIT X1, X2)."""
    for version, path in traces.items():
        last_seen: dict[str, dict] = {}
        deleted = 0
        for line in _lines(path):
            obj = line["object"]
            if obj.get("kind") != "Pod" or line["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            uid = obj["metadata"]["uid"]
            if line["type"] == "DELETED":
                before = last_seen[uid]["metadata"]
                assert "deletionTimestamp" in before, (version, obj["metadata"]["name"])
                assert before["deletionGracePeriodSeconds"] == 0, (version, before["name"])
                deleted += 1
            last_seen[uid] = obj
        assert deleted >= 3, version  # ghost3 (PodGC), the mirror pod, the evicted pod
