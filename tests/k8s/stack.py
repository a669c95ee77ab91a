"""Handoff's live path as a user runs it, pointed at the real control plane: a redis-server,
a migrated database, a Celery worker (both queues) and beat, a demo-mode Daphne serving
``/api``; clusters are added with ``manage.py clusters add NAME --kubeconfig … --start``.

What the tests read is what a user reads: the JSON of ``/api``, ``/healthz`` and the
output of ``manage.py status``; offline, ``record`` then ``triage --trace``.
"""

from __future__ import annotations

import http.cookiejar
import io
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis
from django.core.management import call_command
from django.test import override_settings

from devtools.devstack import start_time, stop_groups
from handoff.live import health, leases, store
from tests.conftest import BASE_DIR, python_env, spawn, stop, wait_until

# Production defaults, except: pods count as stuck 30 s after binding (60 by default) so
# the silent-kubelet situations get there inside the run; 15 s watch windows so hand-overs
# (a successor resuming from the checkpointed version, reading the kubeconfig anew; a
# removed cluster's streams ending) happen inside it.
SETTINGS = {
    "HANDOFF_STUCK_AFTER": "30",
    "HANDOFF_WATCH_WINDOW": "15",
    # Each watch request ends after 10 s (240 by default): a revoked token or a restarted
    # API server is met within seconds, and every stream resumes from its checkpoint often.
    "HANDOFF_WATCH_SERVER_TIMEOUT": "10",
    "HANDOFF_SUPERVISE_INTERVAL": "2",
}
STREAMS = ("pods", "nodes", "events", "fold")
WATCHED = ("pods", "nodes", "events")


@dataclass
class Stack:
    """The running processes and how to reach them."""

    base: Path
    env: dict[str, str]
    site: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    opener: urllib.request.OpenerDirector = field(
        default_factory=lambda: urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
    )

    @property
    def redis_url(self) -> str:
        return self.env["REDIS_URL"]

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis_url)

    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        """GET a JSON path of the site: (HTTP status, body)."""
        try:
            with self.opener.open(self.site + path, timeout=30) as answer:
                return answer.status, orjson.loads(answer.read())
        except urllib.error.HTTPError as exc:
            return exc.code, orjson.loads(exc.read() or b"{}")

    def manage(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """``python manage.py ARGS`` in this stack's environment."""
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=BASE_DIR,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
        return done

    def add_cluster(self, name: str, kubeconfig: Path) -> None:
        """What a user runs, then wait until every stream is held and has listed."""
        self.manage("clusters", "add", name, "--kubeconfig", str(kubeconfig), "--start")
        with self.client() as client:
            wait_until(lambda: all_held(client, name), 60, f"{name}'s streams to be held")
            wait_until(lambda: all_listed(client, name), 60, f"{name}'s first lists")

    def remove_cluster(self, name: str) -> None:
        self.manage("clusters", "remove", name)

    def pods(self, cluster: str, namespace: str) -> list[dict[str, Any]]:
        """Every pod view of a namespace, as /api/clusters/C/pods pages them."""
        found: list[dict[str, Any]] = []
        cursor = ""
        while True:
            query = f"?namespace={namespace}&limit=500" + (f"&cursor={cursor}" if cursor else "")
            status, body = self.get(f"/api/clusters/{cluster}/pods{query}")
            assert status == 200, body
            found += body["pods"]
            if not body.get("next"):
                return found
            cursor = body["next"]

    def start_worker(self) -> None:
        """A Celery worker on both queues (10 processes: a few clusters' streams)."""
        argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", "default,watch"]
        argv += ["-c", "10", "-n", "k8s@%h", "-l", "info", "--without-gossip", "--without-mingle"]
        self.procs["worker"] = spawn(argv, self.base / "worker.log", self.env)

    def stop_worker(self) -> None:
        """A warm shutdown, as a supervisor asks for one (SIGTERM to the main process): the
        stream tasks checkpoint, release their leases and queue their successors."""
        worker = self.procs.pop("worker")
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=60)
        finally:
            stop(worker)  # whatever of its group is left

    def worker_log(self) -> str:
        return (self.base / "worker.log").read_text(errors="replace")

    def stop(self) -> None:
        """Every process at once (each leads its own group): SIGTERM, SIGKILL after 10 s."""
        procs = [self.procs.pop(name) for name in reversed(list(self.procs))]
        stop_groups([(p.pid, start_time(p.pid) or 0) for p in procs], 10)
        for proc in procs:
            proc.wait(timeout=5)


def start_stack(base: Path, database_url: str, redis_url: str) -> Stack:
    """Worker, beat and Daphne on ``redis_url``; returns once the worker's heartbeat is
    fresh and Daphne answers."""
    from tests.browser.conftest import start_daphne

    env = python_env(
        REDIS_URL=redis_url, DATABASE_URL=database_url, HANDOFF_RUN_DIR=str(base), **SETTINGS
    )
    stack = Stack(base, env, "")
    try:
        stack.start_worker()
        beat = [sys.executable, "-m", "celery", "-A", "handoff", "beat", "-l", "info"]
        beat += ["-s", str(base / "beat-schedule")]
        stack.procs["beat"] = spawn(beat, base / "beat.log", env)
        daphne, stack.site = start_daphne({**env, "HANDOFF_DEMO": "1"}, base / "daphne.log")
        stack.procs["daphne"] = daphne
        with stack.client() as client:
            wait_until(lambda: client.get(health.HEARTBEAT_KEY), 60, "the worker's heartbeat")
    except BaseException:
        stack.stop()
        raise
    return stack


def all_held(client: redis.Redis, cluster: str) -> bool:
    return all(leases.holder(client, cluster, s) for s in STREAMS)


def all_listed(client: redis.Redis, cluster: str) -> bool:
    return all(store.stream_state(client, cluster, r).get("rv") for r in WATCHED)


def wait_for(read: Callable[[], Any], ok: Callable[[Any], bool], timeout: float, what: str) -> Any:
    """Poll ``read()`` until ``ok`` holds for its value; that value (else the last one,
    in the assertion message)."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {value!r}")
        time.sleep(1.0)


def offline_triage(stack: Stack, cluster: str, out: Path, at: str) -> list[dict[str, Any]]:
    """``record`` the cluster's stream to ``out``, then ``triage --trace`` it at ``at``
    with the live stuck-after: the pods of the offline answer."""
    with override_settings(REDIS_URL=stack.redis_url):
        call_command("record", cluster, "--out", str(out), stdout=io.StringIO())
    report = io.StringIO()
    call_command(
        "triage",
        "--trace",
        str(out),
        "--at",
        at,
        "--stuck-after",
        SETTINGS["HANDOFF_STUCK_AFTER"],
        "--format",
        "json",
        stdout=report,
    )
    return orjson.loads(report.getvalue())["pods"]


ANSWER = ("verdict", "binding", "node", "reason")


def answer(view: dict[str, Any]) -> tuple:
    """What a situation's test asserts of a pod view: (verdict, binding, node, reason)."""
    return tuple(view[k] for k in ANSWER)


def answers(views: list[dict[str, Any]]) -> dict[tuple[str, str], tuple]:
    return {(v["name"], v["uid"]): answer(v) for v in views}


def api_pods(stack: Stack, cluster: str, namespace: str) -> tuple[str, list[dict[str, Any]]]:
    """(evaluated_at, pod views) of a namespace, from ``/api``."""
    status, body = stack.get(f"/api/clusters/{cluster}/pods?namespace={namespace}")
    assert status == 200, body
    return body["evaluated_at"], body["pods"]


def assert_offline_agrees(stack: Stack, cluster: str, namespace: str, tmp: Path) -> None:
    """``record`` the stream and triage it at the live clock: the same answers for the
    namespace. The live views of time-based verdicts are re-judged every 5 s (the fold's
    sweep), so a disagreement gets two more chances, on fresh live reads, before it fails."""
    for attempt in range(3):
        at, views = api_pods(stack, cluster, namespace)
        out = tmp / f"{namespace}-{attempt}.jsonl"
        offline = [
            p for p in offline_triage(stack, cluster, out, at) if p["namespace"] == namespace
        ]
        if answers(offline) == answers(views):
            return
        time.sleep(2)
    assert answers(offline) == answers(views)
