"""/healthz: Redis reachability, the Celery worker heartbeat and failing watch streams,
503 when unhealthy."""

import io
import os
import signal
import time

import pytest

from devtools.devstack import free_port
from handoff import tasks
from handoff.live import clusters, health, leases, store
from tests.conftest import wait_until


def test_it_is_healthy_with_redis_and_a_real_worker(client, celery_worker):
    celery_worker()
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["redis"]["ok"] is True
    assert body["redis"]["latency_ms"] >= 0
    assert body["celery"]["ok"] is True
    assert 0 <= body["celery"]["heartbeat_age_s"] < 30
    assert body["streams"] == {}


@pytest.mark.slow
def test_it_turns_unhealthy_when_the_worker_stops(client, celery_worker, settings):
    from tests.conftest import stop

    worker = celery_worker()
    settings.HANDOFF_HEARTBEAT_STALE_AFTER = 1
    stop(worker)
    time.sleep(1.5)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["celery"]["ok"] is False


def test_it_is_unhealthy_without_a_heartbeat(client, redis_client):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unhealthy"
    assert body["redis"]["ok"] is True
    assert body["celery"] == {"ok": False, "heartbeat_age_s": None, "stale_after_s": 30}


def test_it_is_unhealthy_when_the_heartbeat_is_stale(client, redis_client):
    health.write_heartbeat(redis_client, now=time.time() - 31)
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["celery"]["heartbeat_age_s"] >= 31


def test_it_is_unhealthy_without_redis(client, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    started = time.monotonic()
    response = client.get("/healthz")
    assert time.monotonic() - started < 5
    assert response.status_code == 503
    body = response.json()
    assert body["redis"] == {"ok": False, "error": "ConnectionError"}
    assert body["celery"]["ok"] is False


def test_it_reveals_no_addresses(client, settings, redis_client):
    settings.REDIS_URL = "redis://:hunter2@127.0.0.1:1/0"
    text = client.get("/healthz").content.decode()
    assert "hunter2" not in text
    assert "127.0.0.1" not in text


def test_it_needs_no_sign_in_outside_demo_mode(client, settings, redis_client):
    settings.HANDOFF_DEMO = False
    assert client.get("/healthz").status_code == 503  # No worker: unhealthy, but answered.
    assert client.get("/").status_code == 302


def test_it_refuses_writes(client, redis_client):
    assert client.post("/healthz").status_code == 405


def test_heartbeat_task_records_the_time(redis_client):
    tasks.heartbeat()
    assert abs(float(redis_client.get(health.HEARTBEAT_KEY)) - time.time()) < 5


# ---------------------------------------------------------------- failing streams


def _kubeconfig(path, port: int):
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: sekrit-token}}]\n"
    )
    return path


def _failing(client) -> dict:
    response = client.get("/healthz")
    return response.status_code, response.json()


def test_a_stream_whose_api_calls_keep_failing_makes_it_unhealthy(
    client, celery_worker, redis_client, tmp_path
):
    """A real worker watching an API server that refuses connections."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    from handoff.tasks import start_stream
    from tests.live.helpers import register

    celery_worker(queues="default,watch")
    register(
        redis_client,
        "down",
        "kubeconfig",
        kubeconfig=str(_kubeconfig(tmp_path / "kc", free_port())),
    )
    start_stream("down", "pods")

    def failing() -> bool:
        health.write_heartbeat(redis_client, now=time.time())
        status, body = _failing(client)
        return status == 503 and not body["streams"]["down"]["pods"]["ok"]

    wait_until(failing, 30, "/healthz to report the failing stream")
    _status, body = _failing(client)
    pods = body["streams"]["down"]["pods"]
    assert body["status"] == "unhealthy"
    assert body["redis"]["ok"]
    assert body["celery"]["ok"]
    assert pods["failures"] >= 3
    assert "failed calls in a row" in pods["problem"]
    assert pods["last_error"].startswith("API unreachable")
    assert any(line.startswith("down/pods: ") for line in body["failing"])
    assert "sekrit-token" not in str(body)
    assert "127.0.0.1" not in str(body)

    out = io.StringIO()
    with pytest.raises(CommandError, match="failing"):
        call_command("status", stdout=out)
    # `status` (a shell on the operator's side) names the API server and the cause.
    assert "FAILING down/pods (127.0.0.1:" in out.getvalue()
    assert "connection refused (NewConnectionError)" in out.getvalue()
    assert "API unreachable" in out.getvalue()


@pytest.mark.slow
def test_a_stream_whose_worker_died_without_successor_makes_it_unhealthy(
    client, celery_worker, redis_client, settings
):
    """The fold of a trace cluster held by a real worker, SIGKILLed, with no beat."""
    from handoff.tasks import start_stream
    from tests.live.helpers import register

    settings.HANDOFF_STREAM_UNHELD_LIMIT = 2
    worker = celery_worker(queues="default,watch")
    register(redis_client, "orphan")
    start_stream("orphan", "fold")
    wait_until(lambda: redis_client.exists(store.lease_key("orphan", "fold")), 20, "the fold lease")
    health.write_heartbeat(redis_client, now=time.time())
    assert _failing(client)[1]["streams"]["orphan"]["fold"]["ok"] is True
    os.killpg(worker.pid, signal.SIGKILL)

    def failing() -> bool:
        health.write_heartbeat(redis_client, now=time.time())
        return _failing(client)[0] == 503

    wait_until(failing, 20, "/healthz to notice the stream has no holder")
    fold = _failing(client)[1]["streams"]["orphan"]["fold"]
    assert fold["held"] is False
    assert "no holder" in fold["problem"]


def test_a_fold_far_behind_its_stream_makes_it_unhealthy(client, redis_client):
    from tests.live.helpers import register

    register(redis_client, "slow")
    health.write_heartbeat(redis_client, now=time.time())
    lease = leases.Lease(redis_client, store.lease_key("slow", "fold"), "test", 30)
    assert lease.acquire()
    old = int((time.time() - 120) * 1000)
    redis_client.xadd(store.events_key("slow"), {store.STREAM_FIELD: b"{}"}, id=f"{old}-0")
    status, body = _failing(client)
    fold = body["streams"]["slow"]["fold"]
    assert status == 503
    assert fold["behind_s"] >= 120
    assert "behind its stream" in fold["problem"]
    # Once the fold has folded that entry, it is healthy again.
    store.note_stream(redis_client, "slow", "fold", renewed=time.time())
    redis_client.hset(store.fold_key("slow"), "cursor", f"{old}-0")
    status, body = _failing(client)
    assert status == 200, body
    assert body["streams"]["slow"]["fold"]["behind_s"] == 0


def test_a_held_watch_that_hears_nothing_makes_it_unhealthy(client, redis_client, settings):
    from tests.live.helpers import register

    settings.HANDOFF_STREAM_SILENCE_LIMIT = 60
    register(redis_client, "quiet", "kubeconfig", kubeconfig="/nowhere")
    health.write_heartbeat(redis_client, now=time.time())
    for stream in (*clusters.WATCH_RESOURCES, clusters.FOLD):
        leases.Lease(redis_client, store.lease_key("quiet", stream), "test", 30).acquire()
        store.note_stream(redis_client, "quiet", stream, seen=time.time())
    assert _failing(client)[0] == 200
    store.note_stream(redis_client, "quiet", "nodes", seen=time.time() - 61)
    status, body = _failing(client)
    assert status == 503
    assert body["streams"]["quiet"]["nodes"]["problem"].startswith("nothing from the API server")
    assert body["streams"]["quiet"]["pods"]["ok"] is True


def test_a_stream_that_cannot_even_start_is_named_after_repeated_tries(
    client, redis_client, tmp_path, monkeypatch
):
    """An in-cluster cluster on a machine with no service account: each start fails."""
    from tests.live.helpers import register

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HANDOFF_SERVICE_ACCOUNT_DIR", str(tmp_path))
    register(redis_client, "nowhere", "in-cluster")
    health.write_heartbeat(redis_client, now=time.time())
    for _ in range(3):  # what beat's supervise does every few seconds
        result = tasks.watch.apply(args=["nowhere", "pods"])
        assert result.failed()
    status, body = _failing(client)
    pods = body["streams"]["nowhere"]["pods"]
    assert status == 503
    assert pods["failures"] == 3
    assert pods["problem"].startswith("3 failed calls in a row, last: in-cluster configuration")
    assert redis_client.get(store.lease_key("nowhere", "pods")) is None
