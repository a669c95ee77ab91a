"""`replay` sends any input the importers read, and every readable trace line — the
reader's slow path (an offset in `observed`, say) included."""

from __future__ import annotations

from pathlib import Path

import orjson

from handoff.live import queries, store
from handoff.live.sources.playback import replay

from .helpers import fold_all, register

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
REAL = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "real"
PODS = REAL / (
    "vmware-tanzu__sonobuoy__pkg_client_results_testdata_results-0.10.tar.gz__resources_ns_"
    "kube-system_Pods.json"
)


def test_a_kubectl_list_is_replayed_as_its_pods(redis_client) -> None:
    register(redis_client, "listed")
    reader = replay(redis_client, "listed", PODS)
    assert reader.format == "snapshot"
    fold_all(redis_client, "listed")
    views = queries.pod_views(redis_client, "listed")
    expected = len(orjson.loads(PODS.read_bytes()))  # a bare array of pods
    assert len(views) == expected


def test_lines_the_reader_takes_the_slow_way_are_replayed_too(redis_client, tmp_path) -> None:
    lines = (DATA / "scheduled-running.jsonl").read_bytes().splitlines()
    odd = []
    for line in lines:
        record = orjson.loads(line)
        if "observed" in record:  # same instant, written with an offset: the slow path
            record["observed"] = record["observed"].replace("Z", "+00:00")
        odd.append(orjson.dumps(record))
    path = tmp_path / "offsets.jsonl"
    path.write_bytes(b"\n".join(odd) + b"\n")
    register(redis_client, "plain")
    register(redis_client, "offsets")
    replay(redis_client, "plain", DATA / "scheduled-running.jsonl")
    replay(redis_client, "offsets", path)
    assert redis_client.xlen(store.events_key("offsets")) == redis_client.xlen(
        store.events_key("plain")
    )
    fold_all(redis_client, "plain")
    fold_all(redis_client, "offsets")
    verdicts = {
        name: sorted(
            (v["name"], v["verdict"]) for v in queries.pod_views(redis_client, name).values()
        )
        for name in ("plain", "offsets")
    }
    assert verdicts["plain"] == verdicts["offsets"]
