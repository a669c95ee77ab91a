"""Named scenarios, recorded and triaged by the timeline engine; determinism; the command."""

from __future__ import annotations

import gc
import gzip
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from handoff.offline.triage import fold_trace
from handoff.sim import Options, find_scenario, run

ROOT = Path(__file__).resolve().parents[2]


def _record(tmp_path: Path, name: str, seed: int = 1, **opts: object) -> Path:
    path = tmp_path / f"{name}-{seed}.jsonl"
    run(find_scenario(name, None), Options(seed=seed, **opts), record=path)  # type: ignore[arg-type]
    return path


def _verdicts(path: Path) -> dict[str, tuple[str, str | None, str | None]]:
    report = fold_trace(path)
    return {p["name"]: (p["verdict"], p.get("reason"), p.get("binding")) for p in report["pods"]}


def test_manual_scheduling_shows_every_case_of_seed_003(tmp_path: Path) -> None:
    verdicts = _verdicts(_record(tmp_path, "manual-scheduling"))
    assert verdicts["bigcpu"][:2] == ("rejected", "OutOfcpu")
    assert verdicts["bigmem"][:2] == ("rejected", "OutOfmemory")
    assert verdicts["badsel"][:2] == ("rejected", "NodeAffinity")
    assert verdicts["ghost3"][0] == "podgc-deleted"
    assert verdicts["pinned"] == ("running", None, "manual")
    assert verdicts["plain"][2] == "scheduler"
    assert verdicts["pinned-tainted"][0] == "evicted"
    assert verdicts["tainted"][0] == "unscheduled"
    assert verdicts["etcd-control-plane"][2] == "static"
    web = [v for n, v in verdicts.items() if n.startswith("web-")]
    assert len(web) == 3
    assert all(v[0] == "running" and v[2] == "manual" for v in web)


def test_manual_scheduling_reproduces_the_seed_message_exactly(tmp_path: Path) -> None:
    path = _record(tmp_path, "manual-scheduling")
    messages = [
        orjson.loads(line)["object"].get("message") for line in path.read_bytes().splitlines()[1:]
    ]
    assert (
        "Node didn't have enough resource: cpu, requested: 100000, used: 950, capacity: 4000"
    ) in messages


def test_handoff_failures_shows_seed_000s_failure_modes(tmp_path: Path) -> None:
    path = _record(tmp_path, "handoff-failures")
    verdicts = _verdicts(path)
    assert verdicts["stale"][0] == "stuck"
    assert verdicts["racer"][:3] == ("rejected", "OutOfcpu", "scheduler")
    assert verdicts["leftover"][0] == "podgc-deleted"
    assert verdicts["hog"][0] == "running"
    before_gc = fold_trace(path, at="2026-01-01T00:03:00Z")
    doomed = next(p for p in before_gc["pods"] if p["name"] == "doomed")
    assert doomed["verdict"] in ("node-lost", "stuck")


@pytest.mark.parametrize("name", ["manual-scheduling", "handoff-failures"])
def test_the_same_seed_gives_identical_bytes(tmp_path: Path, name: str) -> None:
    a = tmp_path / "a.jsonl.gz"
    b = tmp_path / "b.jsonl.gz"
    for path in (a, b):
        run(find_scenario(name, None), Options(seed=7, duration=120), record=path)
    assert a.read_bytes() == b.read_bytes()
    c = tmp_path / "c.jsonl.gz"
    run(find_scenario(name, None), Options(seed=8, duration=120), record=c)
    assert gzip.decompress(c.read_bytes()) != gzip.decompress(a.read_bytes())


def test_the_recording_has_a_header_and_lines_in_observed_order(tmp_path: Path) -> None:
    path = _record(tmp_path, "manual-scheduling", duration=90)
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    assert lines[0] == {
        "handoff_trace": 1,
        "cluster": "sim-manual-scheduling",
        "source": "simulator:manual-scheduling:seed=1",
    }
    observed = [line["observed"] for line in lines[1:]]
    assert observed == sorted(observed)
    assert {line["type"] for line in lines[1:]} >= {"ADDED", "MODIFIED", "DELETED", "BOOKMARK"}


def test_the_simulate_command_records_a_trace(tmp_path: Path) -> None:
    from django.core.management import call_command

    out = tmp_path / "run.jsonl.gz"
    call_command(
        "simulate",
        "--scenario",
        "manual-scheduling",
        "--seed",
        "2",
        "--duration",
        "30",
        "--record",
        str(out),
    )
    head = gzip.decompress(out.read_bytes()).splitlines()[0]
    assert orjson.loads(head)["source"] == "simulator:manual-scheduling:seed=2"


def test_from_the_command_line_the_trace_is_complete_before_the_fast_exit(tmp_path: Path) -> None:
    """``simulate`` ends its process without tearing the cluster down: every line must be
    written (and the gzip trailer too) first, and the exit status must still be 0."""
    argv = ["--scenario", "manual-scheduling", "--seed", "2", "--duration", "200"]
    cli = tmp_path / "cli.jsonl.gz"
    done = subprocess.run(
        [sys.executable, "manage.py", "simulate", *argv, "--record", str(cli)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"trace written to {cli}" in done.stdout
    from django.core.management import call_command

    here = tmp_path / "here.jsonl.gz"
    call_command("simulate", *argv, "--record", str(here))
    assert gzip.decompress(cli.read_bytes()) == gzip.decompress(here.read_bytes())
    assert gc.isenabled()


def test_steady_shows_a_healthy_cluster_with_a_few_failures(tmp_path: Path) -> None:
    path = _record(tmp_path, "steady", duration=3600)
    report = fold_trace(path)
    verdicts = report["summary"]["verdicts"]
    healthy = verdicts["running"] + verdicts["succeeded"] + verdicts["deleted"]
    troubled = sum(verdicts[v] for v in ("stuck", "rejected", "podgc-deleted", "evicted"))
    assert healthy > 100
    assert 0 < troubled < healthy * 0.25


def test_scale_starts_full_and_turns_pods_over(tmp_path: Path) -> None:
    _, stats = run(
        find_scenario("scale", None),
        Options(seed=1, nodes=20, pods=600, churn=10, duration=30),
        record=tmp_path / "scale.jsonl",
    )
    assert stats.nodes == 20
    assert 600 <= stats.pods <= 620
    assert stats.lines > 600 + 20 + 29 * 10 * 8


def test_it_can_record_events_through_events_k8s_io(tmp_path: Path) -> None:
    path = tmp_path / "ev.jsonl"
    run(
        find_scenario("manual-scheduling", None),
        Options(seed=1, duration=40),
        record=path,
        events_group="events.k8s.io/v1",
    )
    events = [
        orjson.loads(line)["object"]
        for line in path.read_bytes().splitlines()[1:]
        if b'"kind":"Event"' in line and b'"BOOKMARK"' not in line
    ]
    assert events
    assert all(e["apiVersion"] == "events.k8s.io/v1" for e in events)
    kubelet = next(e for e in events if e["reportingController"] == "kubelet")
    assert kubelet["deprecatedSource"]["component"] == "kubelet"


def test_the_trace_does_not_depend_on_hash_randomisation(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    code = (
        "import sys; from handoff.sim import Options, find_scenario, run; "
        "run(find_scenario('handoff-failures', None), Options(seed=4, duration=120), "
        "record=sys.argv[1])"
    )
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"h{hash_seed}.jsonl"
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        subprocess.run(
            [sys.executable, "-c", code, str(out)],
            env=env,
            check=True,
            timeout=60,
            cwd=Path(__file__).parents[2],
        )
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]


def test_owners_shows_a_quota_starved_workload_and_a_podgc_loop(tmp_path: Path) -> None:
    """The ReplicaSet's FailedCreate as controller_utils.go writes it (through the event
    correlator), under its Deployment; the pinned Deployment as one loop."""
    report = fold_trace(_record(tmp_path, "owners"))

    (failure,) = report["owners"]["failing"]
    assert (failure["owner"]["kind"], failure["owner"]["namespace"]) == ("ReplicaSet", "team")
    assert failure["workload"] == {"kind": "Deployment", "name": "api"}
    assert failure["cause"] == "quota"
    assert 'Error creating: pods "api-' in failure["message"]
    assert (
        "exceeded quota: team-pods, requested: pods=1, used: pods=2, limited: pods=2"
        in (failure["message"])
    )
    assert failure["count"] > 3
    assert sum(p["namespace"] == "team" and p["verdict"] == "running" for p in report["pods"]) == 2
    (loop,) = report["owners"]["loops"]
    assert loop["owner"] == {"kind": "Deployment", "namespace": "default", "name": "pinned"}
    assert (loop["verdict"], loop["reason"]) == ("podgc-deleted", "orphaned")
    assert loop["count"] >= 4
    assert 40 <= loop["every_seconds"] <= 80
