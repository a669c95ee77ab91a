"""/healthz: Redis reachability and the Celery worker heartbeat, 503 when unhealthy."""

import time

import pytest

from handoff import health, tasks
from handoff.devstack import free_port


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
