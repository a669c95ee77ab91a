"""Settings come from the environment; production settings pass `check --deploy`."""

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import load_backend

from handoff.settings import envbool, envint, envlist

BASE_DIR = Path(__file__).resolve().parent.parent
SETTINGS = BASE_DIR / "handoff" / "settings.py"
PRODUCTION_KEY = "k3Vq8-production-test-key-that-is-long-and-random-0f9b2c7d1e6a5"


def load_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **env: str) -> dict:
    """Evaluate handoff/settings.py afresh under `env` (on top of a clean slate)."""
    for name in ("DEBUG", "HANDOFF_DEMO", "SECRET_KEY", "DATABASE_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HANDOFF_RUN_DIR", str(tmp_path / "run"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_passes_check_deploy_with_production_env(tmp_path):
    result = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY=PRODUCTION_KEY,
        ALLOWED_HOSTS="handoff.example.com",
        HANDOFF_RUN_DIR=str(tmp_path),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_it_refuses_production_without_secret_key(tmp_path):
    result = manage("check", DEBUG="0", HANDOFF_RUN_DIR=str(tmp_path))
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_it_raises_without_secret_key_in_production(monkeypatch, tmp_path):
    with pytest.raises(ImproperlyConfigured):
        load_settings(monkeypatch, tmp_path, DEBUG="0")


def test_it_allows_a_dev_key_in_demo_mode(monkeypatch, tmp_path):
    ns = load_settings(monkeypatch, tmp_path, DEBUG="0", HANDOFF_DEMO="1")
    assert ns["SECRET_KEY"].startswith("django-insecure-")


def test_it_defaults_to_sqlite_in_the_run_dir(monkeypatch, tmp_path):
    ns = load_settings(monkeypatch, tmp_path)
    db = ns["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(db["NAME"]) == tmp_path / "run" / "db.sqlite3"
    assert (tmp_path / "run").is_dir()


def test_it_reads_a_postgresql_database_url(monkeypatch, tmp_path):
    url = "postgres://handoff:secret@db.internal:5432/handoff"
    db = load_settings(monkeypatch, tmp_path, DATABASE_URL=url)["DATABASES"]["default"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["HOST"], db["PORT"], db["NAME"], db["USER"]) == (
        "db.internal",
        5432,
        "handoff",
        "handoff",
    )
    assert "OPTIONS" not in db or "init_command" not in db["OPTIONS"]


def test_it_ships_the_postgresql_driver():
    # Fails with ImproperlyConfigured("Error loading psycopg...") when the driver is missing.
    assert load_backend("django.db.backends.postgresql").DatabaseWrapper.vendor == "postgresql"


def test_it_points_celery_and_channels_at_redis_url(monkeypatch, tmp_path):
    url = "redis://redis.internal:6380/2"
    ns = load_settings(monkeypatch, tmp_path, REDIS_URL=url)
    assert ns["CELERY_BROKER_URL"] == url
    assert ns["CHANNEL_LAYERS"]["default"]["CONFIG"]["hosts"] == [
        {"address": url, "max_connections": 1000, "socket_timeout": 30}
    ]


def test_it_defaults_redis_url_to_localhost(monkeypatch, tmp_path):
    assert load_settings(monkeypatch, tmp_path)["REDIS_URL"] == "redis://127.0.0.1:6379/0"


def test_it_hardens_cookies_and_transport_in_production(monkeypatch, tmp_path):
    ns = load_settings(monkeypatch, tmp_path, DEBUG="0", SECRET_KEY=PRODUCTION_KEY)
    assert ns["SECURE_SSL_REDIRECT"]
    assert ns["SESSION_COOKIE_SECURE"]
    assert ns["CSRF_COOKIE_SECURE"]
    assert ns["SECURE_HSTS_SECONDS"] >= 31536000
    assert ns["SECURE_REDIRECT_EXEMPT"] == [r"^healthz$"]


def test_debug_pages_are_off_unless_asked_for(monkeypatch, tmp_path):
    """A fresh checkout runs (plain HTTP, a development key) without Django's debug pages,
    which would show code and settings to whoever makes a request fail."""
    ns = load_settings(monkeypatch, tmp_path)
    assert ns["DEBUG"] is False
    assert ns["SECRET_KEY"].startswith("django-insecure-")
    assert not ns["SECURE_SSL_REDIRECT"]
    assert ns["WHITENOISE_USE_FINDERS"] is True
    assert load_settings(monkeypatch, tmp_path, DEBUG="1")["DEBUG"] is True


def test_it_leaves_http_alone_in_debug(monkeypatch, tmp_path):
    ns = load_settings(monkeypatch, tmp_path, DEBUG="1")
    assert not ns["SECURE_SSL_REDIRECT"]
    assert not ns["SESSION_COOKIE_SECURE"]
    assert ns["SECURE_HSTS_SECONDS"] == 0


def test_it_schedules_the_worker_heartbeat(monkeypatch, tmp_path):
    ns = load_settings(monkeypatch, tmp_path, HANDOFF_HEARTBEAT_INTERVAL="7")
    entry = ns["CELERY_BEAT_SCHEDULE"]["heartbeat"]
    assert entry["task"] == "handoff.tasks.heartbeat"
    assert entry["schedule"] == 7
    assert ns["CELERY_BEAT_SCHEDULE_FILENAME"] == str(tmp_path / "run" / "celerybeat-schedule")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("Yes", True), ("on", True), ("0", False), ("no", False)],
)
def test_envbool(monkeypatch, raw, expected):
    monkeypatch.setenv("HANDOFF_TEST_FLAG", raw)
    assert envbool("HANDOFF_TEST_FLAG", "False") is expected


def test_envint_and_envlist_fall_back_to_defaults(monkeypatch):
    monkeypatch.delenv("HANDOFF_TEST_N", raising=False)
    monkeypatch.setenv("HANDOFF_TEST_LIST", " a.example, b.example ,,")
    assert envint("HANDOFF_TEST_N", "12") == 12
    assert envlist("HANDOFF_TEST_LIST", "") == ["a.example", "b.example"]


def test_it_exempts_healthz_from_the_ssl_redirect(client, settings, redis_client):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/").status_code == 301
    assert client.get("/healthz").status_code in (200, 503)


def test_without_redis_url_it_uses_the_running_demos_redis(monkeypatch, tmp_path):
    from handoff import demoenv

    run = tmp_path / "run"
    run.mkdir()
    demoenv.publish(run, redis_url="redis://127.0.0.1:7777/0", url="http://127.0.0.1:8000/")
    settings = load_settings(monkeypatch, tmp_path)
    assert settings["REDIS_URL"] == "redis://127.0.0.1:7777/0"
    assert settings["REDIS_URL_FROM"] == str(run / "demo.json")
    # REDIS_URL wins over the file.
    settings = load_settings(monkeypatch, tmp_path, REDIS_URL="redis://10.0.0.1:6379/1")
    assert settings["REDIS_URL"] == "redis://10.0.0.1:6379/1"


def test_a_file_left_by_a_dead_demo_is_ignored(monkeypatch, tmp_path):
    import json

    run = tmp_path / "run"
    run.mkdir()
    dead = {"pid": 999999999, "started": 1, "redis_url": "redis://127.0.0.1:7777/0"}
    (run / "demo.json").write_text(json.dumps(dead))
    settings = load_settings(monkeypatch, tmp_path)
    assert settings["REDIS_URL"] == "redis://127.0.0.1:6379/0"
    assert settings["REDIS_URL_FROM"] == "the default"
