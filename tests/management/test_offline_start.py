"""``manage.py triage`` starts without Django's app registry (issue 19 item 7): the web
apps are never imported for an offline triage, Django's own way is kept where it
decides (``--settings``), and ``--cluster`` sets Django up itself."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import BASE_DIR, python_env

TRACE = BASE_DIR / "tests" / "data" / "traces" / "node-lost.jsonl"
PROBE = """
import sys
from handoff.management.oneline import run_offline
ran = run_offline(sys.argv[1:])
from django.apps import apps
loaded = ("daphne" in sys.modules, "webui" in sys.modules)
print("ran", ran, "apps", apps.ready, "daphne", loaded[0], "webui", loaded[1])
"""


def _probe(*argv: str, **env: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "manage.py", *argv],
        cwd=BASE_DIR,
        env=python_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.splitlines()


def test_an_offline_triage_loads_no_web_app() -> None:
    lines = _probe("triage", "--trace", str(TRACE))

    assert lines[0].split()[:2] == ["VERDICT", "REASON"]
    assert lines[-1] == "ran True apps False daphne False webui False"


def test_django_decides_with_settings_given_or_another_command() -> None:
    given = _probe("triage", "--trace", str(TRACE), "--settings", "handoff.settings")
    other = _probe("convert", "--help")

    assert given == ["ran False apps False daphne False webui False"]
    assert other == ["ran False apps False daphne False webui False"]


def test_a_live_triage_sets_django_up_itself(redis_url: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "triage", "--cluster", "nowhere"],
        cwd=BASE_DIR,
        env=python_env(REDIS_URL=redis_url, HANDOFF_RUN_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 1
    assert done.stderr.strip() == (
        "CommandError: no cluster named 'nowhere' (python manage.py clusters list)"
    )
