"""Secrets never reach Redis, the logs, the API, the pages or the downloads.

Pods carrying a password in a container env value, in the last-applied-configuration
annotation and in token-like annotations are replayed through the real ingestion path (the
`replay` command into a cluster's stream, folded by a real Celery worker logging at DEBUG);
then every page, API endpoint and export of that cluster and of each pod is fetched as a
signed-in user, the same trace is uploaded to the replay page and its views fetched, and
Redis, the responses and the worker's log are scanned for the secrets.
"""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import orjson
import pytest
import redis
from django.core.management import call_command
from django.test import Client

from handoff.live import clusters, queries
from handoff.tasks import start_stream
from tests.conftest import python_env, spawn, stop, wait_until
from tests.live.helpers import everything_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "secrets.jsonl"
SECRETS = ("hunter2", "tok-3f9a1c7e5b", "Bearer eyJhbGciOi")
CLUSTER = "secrets"


def _trace_with_token_annotations(path: Path) -> Path:
    """secrets.jsonl, its pod also carrying token-like annotations."""
    out = []
    for line in TRACE.read_bytes().splitlines():
        record = orjson.loads(line)
        obj = record.get("object") or {}
        if obj.get("kind") == "Pod":
            notes = obj["metadata"].setdefault("annotations", {})
            notes["example.com/api-token"] = SECRETS[1]
            notes["example.com/authorization"] = SECRETS[2] + "J9.payload.sig"
        out.append(orjson.dumps(record))
    path.write_bytes(b"\n".join(out) + b"\n")
    return path


def _urls(client: Client, cluster: str) -> list[str]:
    pods = client.get(f"/api/clusters/{cluster}/pods").json()["pods"]
    assert pods, "the replayed pods are listed"
    urls = [
        "/",
        f"/clusters/{cluster}/",
        f"/clusters/{cluster}/fleet/",
        f"/clusters/{cluster}/nodes/",
        "/api/clusters",
        f"/api/clusters/{cluster}/summary",
        f"/api/clusters/{cluster}/pods",
        f"/api/clusters/{cluster}/pods?q=payments",
        f"/api/clusters/{cluster}/nodes",
        f"/api/clusters/{cluster}/fleet",
        f"/clusters/{cluster}/export/pods.csv",
        f"/clusters/{cluster}/export/pods.json",
        "/metrics",
    ]
    for pod in pods:
        ns, name = pod["namespace"], pod["name"]
        urls += [
            f"/clusters/{cluster}/pods/{ns}/{name}/",
            f"/api/clusters/{cluster}/pods/{ns}/{name}",
            f"/clusters/{cluster}/pods/{ns}/{name}/chart.html",
        ]
    return urls


def _scan(body: bytes, where: str) -> None:
    for secret in SECRETS:
        assert secret.encode() not in body, f"{secret!r} leaked into {where}"


def test_secrets_reach_neither_redis_nor_logs_nor_any_page(
    tmp_path: Path, redis_client: redis.Redis, django_user_model, settings
) -> None:
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_REPLAY_UPLOAD_DIR = str(tmp_path / "uploads")
    trace = _trace_with_token_annotations(tmp_path / "secrets.jsonl")
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    log = tmp_path / "worker.log"
    argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", "default,watch"]
    argv += ["-c", "2", "-n", "secrets@%h", "-l", "debug", "--without-gossip", "--without-mingle"]
    worker = spawn(argv, log, python_env(HANDOFF_RUN_DIR=str(tmp_path), LOG_LEVEL="DEBUG"))
    try:
        out, err = io.StringIO(), io.StringIO()
        call_command(
            "replay", str(trace), "--cluster", CLUSTER, "--speed", "max", stdout=out, stderr=err
        )
        start_stream(CLUSTER, clusters.FOLD)
        wait_until(lambda: queries.pod_views(redis_client, CLUSTER), 60, "the fold worker")
    finally:
        stop(worker)
    _scan(out.getvalue().encode() + err.getvalue().encode(), "the replay command's output")
    _scan(log.read_bytes(), "the worker's log")
    _scan(everything_in(redis_client), "Redis")

    user = django_user_model.objects.create_user("oncall", password="not-used-here")
    client = Client()
    client.force_login(user)
    for url in _urls(client, CLUSTER):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        _scan(b"".join(response) if response.streaming else response.content, url)

    with trace.open("rb") as upload:
        response = client.post("/replay/", {"trace": upload})
    assert response.status_code == 302, response.content[:500]
    replay = response["Location"]
    trace_id = replay.rstrip("/").rsplit("/", 1)[-1]
    pods = client.get(f"/api/replay/{trace_id}/pods").json()["pods"]
    urls = [
        replay,
        f"/api/replay/{trace_id}/pods",
        f"/api/replay/{trace_id}/summary",
        f"/api/replay/{trace_id}/nodes",
        f"/api/replay/{trace_id}/fleet",
    ]
    urls += [f"/api/replay/{trace_id}/pods/{p['namespace']}/{p['name']}" for p in pods]
    urls += [f"/replay/{trace_id}/pods/{p['namespace']}/{p['name']}/" for p in pods]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        _scan(response.content, url)
    for stored in Path(settings.HANDOFF_REPLAY_UPLOAD_DIR).iterdir():
        with gzip.open(stored) as kept:
            _scan(kept.read(), f"the stored upload {stored.name}")
