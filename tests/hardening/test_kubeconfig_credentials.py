"""Kubeconfig credentials never reach logs, Redis, the database or command output — not
while watching, not when the API server errors, not when the kubeconfig does not work."""

from __future__ import annotations

import io
import sys
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
import redis
from django.core.management import CommandError, call_command

from devtools.devstack import free_port
from handoff.live import clusters, queries, store
from handoff.models import Cluster
from handoff.sim.scenarios import SCENARIOS, Options
from handoff.sim.serve.server import SimServer
from handoff.tasks import start_stream
from tests.conftest import python_env, spawn, stop, wait_until
from tests.live.helpers import everything_in

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TOKEN = "kc-token-7c1f0e9b2d4a"


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: c\n  cluster:\n    server: {server}\n"
        f"users:\n- name: u\n  user:\n    token: {TOKEN}\n"
        "contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n"
        "current-context: c\n"
    )
    return path


def test_tokens_stay_in_the_kubeconfig(tmp_path: Path, redis_client: redis.Redis) -> None:
    sim = SimServer(SCENARIOS["manual-scheduling"].build(Options(seed=3)), speed=20.0)
    sim.start()
    try:
        faults = {"faults": [{"fault": "error", "resource": "pods", "count": 4}]}
        request = urllib.request.Request(
            f"{sim.address}/_sim/faults", data=orjson.dumps(faults), method="POST"
        )
        urllib.request.urlopen(request, timeout=5).close()
        out = io.StringIO()
        working = _kubeconfig(tmp_path / "working", sim.address)
        broken = _kubeconfig(tmp_path / "broken", f"http://127.0.0.1:{free_port()}")
        call_command("clusters", "add", "good", "--kubeconfig", str(working), stdout=out)
        # Nothing answers there: added unchecked, its streams then fail.
        call_command(
            "clusters", "add", "bad", "--kubeconfig", str(broken), "--no-check", stdout=out
        )
        call_command("clusters", "list", stdout=out)
        log = tmp_path / "worker.log"
        argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", "default,watch"]
        argv += ["-c", "8", "-n", "creds@%h", "-l", "debug", "--without-gossip"]
        argv += ["--without-mingle"]
        worker = spawn(argv, log, python_env(HANDOFF_RUN_DIR=str(tmp_path), LOG_LEVEL="DEBUG"))
        try:
            for name in ("good", "bad"):
                for stream in clusters.cluster(redis_client, name).streams():
                    start_stream(name, stream)
            wait_until(lambda: queries.pod_views(redis_client, "good"), 60, "the good cluster")
            wait_until(
                lambda: store.stream_state(redis_client, "bad", "pods").get("last_error"),
                60,
                "the broken kubeconfig's error",
            )
            time.sleep(2)
            # The broken cluster's streams fail: status says so, and exits non-zero.
            with pytest.raises(CommandError, match="failing stream"):
                call_command("status", stdout=out)
        finally:
            stop(worker)
    finally:
        sim.stop()
    secret = TOKEN.encode()
    assert secret not in log.read_bytes()
    assert secret not in everything_in(redis_client)
    assert TOKEN not in out.getvalue()
    assert "bad" in out.getvalue()
    rows = list(Cluster.objects.values_list("kubeconfig", "context", "options"))
    assert TOKEN not in repr(rows)
    assert b"API unreachable" in log.read_bytes() or b"HTTP 500" in log.read_bytes()
