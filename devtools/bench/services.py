"""The real services a live benchmark runs against: redis-server, a Celery worker, daphne."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import redis

from devtools.devstack import free_port, group_members, port_open, start_time, stop_groups
from handoff.live import clusters, store

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


class Services:
    """The real processes the live figures need, started once per run and stopped at the
    end: a private redis-server, and (for latency) a migrated SQLite database with a
    signed-in session, a Celery worker on the ``watch`` queue, and Daphne."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self.named: dict[str, subprocess.Popen] = {}
        self._redis_url: str | None = None
        self.env: dict[str, str] = {}
        self.address = ""
        self.web_processes = 0

    def redis_url(self) -> str:
        if self._redis_url is None:
            binary = shutil.which("redis-server")
            if binary is None:
                raise RuntimeError("redis-server not found (Debian: apt-get install redis-server)")
            port = free_port()
            data = self.workdir / "redis"
            data.mkdir(parents=True, exist_ok=True)
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data)]
            argv += ["--save", "", "--appendonly", "no", "--slowlog-max-len", "1000"]
            self._spawn(argv, "redis")
            self._wait(lambda: port_open(port), "redis-server")
            self._redis_url = f"redis://127.0.0.1:{port}/0"
            run_dir = self.workdir / "run"
            run_dir.mkdir(exist_ok=True)
            self.env = {
                **os.environ,
                "REDIS_URL": self._redis_url,
                "DATABASE_URL": f"sqlite:///{self.workdir / 'bench.sqlite3'}",
                "HANDOFF_RUN_DIR": str(run_dir),
                "HANDOFF_DEMO": "0",
                "ALLOWED_HOSTS": "127.0.0.1",
                "DJANGO_SETTINGS_MODULE": "handoff.settings",
                "PYTHONUNBUFFERED": "1",
            }
        return self._redis_url

    def session_cookie(self) -> str:
        """A signed-in session of a fresh user in the bench's own database."""
        self.redis_url()
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v0"],
            env=self.env,
            check=True,
        )
        script = (
            "from django.contrib.auth import get_user_model, SESSION_KEY, BACKEND_SESSION_KEY,"
            " HASH_SESSION_KEY\n"
            "from django.contrib.sessions.backends.db import SessionStore\n"
            "User = get_user_model()\n"
            "u = User.objects.filter(username='bench').first() or "
            "User.objects.create_user('bench', password=None)\n"
            "s = SessionStore()\n"
            "s[SESSION_KEY] = str(u.pk)\n"
            "s[BACKEND_SESSION_KEY] = 'django.contrib.auth.backends.ModelBackend'\n"
            "s[HASH_SESSION_KEY] = u.get_session_auth_hash()\n"
            "s.create()\n"
            "print(s.session_key)\n"
        )
        out = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", script],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.strip().splitlines()[-1]

    def worker(self) -> None:
        if self._running("worker"):
            return
        argv = [sys.executable, "-m", "celery", "-A", "handoff", "worker", "-Q", "watch"]
        argv += ["-c", "1", "-n", "bench@%h", "-l", "warning", "--without-gossip"]
        argv += ["--without-mingle"]
        self._spawn(argv, "worker")

    def daphne(self) -> str:
        if self._running("daphne"):
            return self.address
        port = free_port()
        # As the product serves (docker-compose.yml, `manage.py demo`): several Daphne
        # processes on one socket.
        from django.conf import settings

        self.web_processes = settings.HANDOFF_WEB_PROCESSES
        argv = [sys.executable, str(MANAGE), "serve", "-b", "127.0.0.1", "-p", str(port)]
        self._spawn([*argv, "--processes", str(self.web_processes)], "daphne")
        self._wait(lambda: port_open(port), "daphne")
        self.address = f"127.0.0.1:{port}"
        return self.address

    def _running(self, name: str) -> bool:
        return name in self.named and self.named[name].poll() is None

    def _spawn(self, argv: list[str], name: str) -> None:
        with open(self.workdir / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                argv,
                env=self.env or None,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.procs.append(proc)
        self.named[name] = proc

    def live_stack(self, cluster: str) -> tuple[redis.Redis, str, str]:
        """An empty Redis holding one registered trace cluster whose fold task runs in a
        Celery worker, and Daphne with a signed-in session: (client, cookie, address)."""
        client = redis.Redis.from_url(self.redis_url())
        client.flushall()
        cookie, address = self.fold_stack(cluster)
        return client, cookie, address

    def fold_stack(self, cluster: str) -> tuple[str, str]:
        """Beside what Redis holds: one registered trace cluster whose fold task runs in a
        Celery worker, and Daphne with a signed-in session: (cookie, address)."""
        url = self.redis_url()
        cookie = self.session_cookie()
        client = redis.Redis.from_url(url)
        clusters.register_cluster(client, clusters.ClusterConfig(name=cluster, kind="trace"))
        self.worker()
        address = self.daphne()
        from celery import Celery

        Celery(broker=url).send_task("handoff.tasks.fold", args=[cluster], queue="watch")
        fold_lease = store.lease_key(cluster, clusters.FOLD)
        self._wait(lambda: client.exists(fold_lease), "the fold task", 60)
        client.close()
        return cookie, address

    def cpu_seconds(self, name: str) -> float:
        """CPU time used so far by a started service and its children (its process group):
        what it costs, whatever else the machine is doing."""
        proc = self.named[name]
        total = 0
        for pid in group_members(proc.pid, start_time(proc.pid) or 0):
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / os.sysconf("SC_CLK_TCK")

    def _wait(self, ready: Callable[[], bool], what: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{what} did not start; see {self.workdir}/*.log")

    def stop(self) -> None:
        """Stop every process, Redis last: a stream task that is told to stop checkpoints
        and releases its lease in Redis before the worker exits (handoff/tasks.py)."""
        server = self.named.get("redis")
        for batch in ([p for p in self.procs if p is not server], [server] if server else []):
            groups = [(p.pid, start_time(p.pid) or 0) for p in batch if p.poll() is None]
            stop_groups(groups, 10)
            for proc in batch:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5)
        self.procs.clear()
        self.named.clear()
        self._redis_url = None
