"""Runs the whole stack on one machine for `make demo` (`python manage.py demo`).

A private redis-server (unless REDIS_URL is set), migrations, a Celery worker and beat,
Daphne, and the simulator once it exists; each child in its own process group with its
output in RUN_DIR/<name>.log. Ctrl-C or SIGTERM only sets a flag; the loop notices it and
stops every child. A pidfile remembers the children, so a run that was killed outright is
cleaned up by the next one.

Once serving, it publishes its Redis and URL in RUN_DIR/demo.json (``handoff.demoenv``),
which settings read when REDIS_URL is unset: commands from a second shell find the demo.

Plain Python on purpose: no Django import, so each step can be tested alone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from handoff import demoenv

PIDFILE = "demo.pid"
# The simulator's demo scenario, live at wall-clock speed, served over the Kubernetes API
# and watched by the worker like any cluster (registered as DEMO_CLUSTER).
SIMULATOR_ARGS = ["simulate", "--scenario", "demo", "--speed", "1"]
DEMO_CLUSTER = "demo"
# Watch-queue processes: each runs a stream host holding up to HANDOFF_STREAMS_PER_WORKER
# streams (the demo's four and any cluster added); the second is a spare that supervise
# starts a host in when the first is full, or that takes over when it is killed.
WATCH_SLOTS = 2
PR_SET_PDEATHSIG = 1


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def free_port(host: str = "127.0.0.1", preferred: int = 0, tries: int = 1) -> int:
    """The first port from `preferred` on that nothing listens on (any free one for 0)."""
    for port in range(preferred, preferred + tries) if preferred else [0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # As servers do: a port whose old connections linger in TIME_WAIT is free.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise OSError(f"no free port in {preferred}..{preferred + tries - 1} on {host}")


def proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, ...);
    None for a process that is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields after it do not.
    return text[text.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """When the process started (clock ticks since boot): with the pid, its identity."""
    stat = proc_stat(pid)
    if stat is None or stat[0] == "Z":
        return None
    return int(stat[19])


def live_processes() -> dict[int, tuple[int, int]]:
    """Every live (not zombie) process: pid -> (parent pid, process group), one walk of
    /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat and stat[0] != "Z":
                found[int(entry.name)] = (int(stat[1]), int(stat[2]))
    return found


def group_members(pgid: int, leader_started: int) -> list[int]:
    """Live processes of the group whose leader was process `pgid` started at `leader_started`.

    A live leader with another start time means the pid was recycled: not our group. A dead
    leader's group is still ours: Linux never hands out a pid still in use as a group id.
    """
    leader = start_time(pgid)
    if leader is not None and leader != leader_started:
        return []
    return [pid for pid, (_, group) in live_processes().items() if group == pgid]


def _signal_all(pids: list[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def stop_groups(groups: list[tuple[int, int]], timeout: float) -> None:
    """SIGTERM every member of each (pgid, leader start time) group, SIGKILL what remains.

    Members that appear while the group shuts down (a pool replacing a worker, a shell
    forking) get their SIGTERM too.
    """
    signalled: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        members = {p for g in groups for p in group_members(*g)}
        if not members:
            return
        _signal_all(sorted(members - signalled), signal.SIGTERM)
        signalled |= members
        time.sleep(0.1)
    _signal_all([p for g in groups for p in group_members(*g)], signal.SIGKILL)


def stop_process(pid: int, started: int, timeout: float) -> None:
    """SIGTERM one process (if it is still the one that started then), SIGKILL after timeout."""
    _signal_all([pid], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while start_time(pid) == started:
        if time.monotonic() > deadline:
            _signal_all([pid], signal.SIGKILL)
            return
        time.sleep(0.1)


def die_with_parent() -> None:
    # Runs in the child between fork and exec: if the supervisor is killed outright,
    # the kernel sends its children SIGTERM instead of leaving them running.
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    name: str
    argv: list[str]
    # A required child exiting stops the whole stack; an optional one is only reported.
    required: bool = True
    proc: subprocess.Popen | None = None
    started: int = 0


@dataclass
class Devstack:
    base_dir: Path
    run_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    redis_url: str | None = None
    with_simulator: bool = False
    # Watch this cluster instead: (name, kubeconfig path, context), checked beforehand.
    watch: tuple[str, str, str] | None = None
    python: str = sys.executable
    stop_timeout: float = 10.0
    start_timeout: float = 60.0
    poll_interval: float = 0.5
    out: TextIO = sys.stdout
    children: list[Child] = field(default_factory=list)
    stopping: bool = False
    healthy: bool = False
    exit_code: int = 0

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> int:
        self.install_signal_handlers()
        try:
            if self.start():
                while self.step():
                    time.sleep(self.poll_interval)
        finally:
            self.shutdown()
        return self.exit_code

    def install_signal_handlers(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self.request_stop)

    def request_stop(self, signum: int, frame: object) -> None:
        self.stopping = True

    def start(self) -> bool:
        steps = [
            self.prepare,
            self.start_redis,
            self.migrate,
            self.start_worker,
            self.start_beat,
            self.start_web,
            self.start_simulator,
            self.watch_cluster,
            self.wait_until_serving,
        ]
        # all() stops at the first step that fails or finds us stopping.
        return all(not self.stopping and step() for step in steps)

    def step(self) -> bool:
        """One pass of the supervision loop: returns whether to go on."""
        if self.stopping:
            return False
        for child in list(self.children):
            code = child.proc.poll()
            if code is None:
                continue
            self.say(f"{child.name} exited with code {code}; see {self.log_path(child.name)}")
            if child.required:
                self.exit_code = 1
                return False
            self.children.remove(child)
            self.write_pidfile()
        if not self.healthy and self.probe() == 200:
            self.healthy = True
            self.say("healthy: Redis reachable, Celery worker heartbeat fresh")
        return True

    def shutdown(self) -> None:
        demoenv.withdraw(self.run_dir)
        if not self.children:
            self.remove_pidfile()
            return
        self.say("stopping…")
        # Redis last: the worker and beat shut down more cleanly with their broker there.
        redis = [c for c in self.children if c.name == "redis"]
        others = [c for c in self.children if c.name != "redis"]
        for batch in (others, redis):
            stop_groups([(c.proc.pid, c.started) for c in batch], self.stop_timeout)
            for child in batch:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.proc.wait(timeout=1)
        self.children.clear()
        self.remove_pidfile()
        self.say("stopped")

    # -- start steps: each returns whether to go on ----------------------------------------

    def prepare(self) -> bool:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.reap_previous_run()
        self.write_pidfile()
        return True

    def reap_previous_run(self) -> None:
        record = self.read_pidfile()
        if record is None:
            return
        supervisor = record.get("supervisor", {})
        pid, started = supervisor.get("pid"), supervisor.get("started")
        if pid and pid != os.getpid() and start_time(pid) == started:
            # Still running: asked politely, it stops its own children.
            self.say(f"stopping the previous run (pid {pid})")
            stop_process(pid, started, self.stop_timeout + 5)
        groups = [(c["pid"], c["started"]) for c in record.get("children", [])]
        if any(group_members(*g) for g in groups):
            self.say("stopping processes left over by a previous run")
            stop_groups(groups, self.stop_timeout)
        self.pidfile.unlink(missing_ok=True)

    def start_redis(self) -> bool:
        if self.redis_url:
            return True
        binary = shutil.which("redis-server")
        if binary is None:
            self.say("redis-server not found: install it (Debian: apt-get install redis-server)")
            self.exit_code = 1
            return False
        port = free_port()
        data_dir = self.run_dir / "redis"
        data_dir.mkdir(exist_ok=True)
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data_dir)]
        argv += ["--appendonly", "yes", "--save", "", "--daemonize", "no"]
        self.spawn(Child("redis", argv))
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        return self.wait_for("redis", lambda: self.redis_answers(port))

    def migrate(self) -> bool:
        child = Child("migrate", [self.python, "manage.py", "migrate", "--noinput"])
        proc = self.popen(child)
        while proc.poll() is None:
            if self.stopping:
                stop_groups([(proc.pid, start_time(proc.pid) or 0)], self.stop_timeout)
                return False
            time.sleep(0.1)
        if proc.returncode != 0:
            self.say(f"migrate failed; see {self.log_path('migrate')}")
            self.exit_code = 1
            return False
        return True

    def start_worker(self) -> bool:
        """Two workers: short tasks (the heartbeat among them) must not wait behind the
        stream hosts, which hold their process until the worker stops."""
        base = [self.python, "-m", "celery", "-A", "handoff", "worker", "-l", "info"]
        # Gossip and mingle only slow the start here; nothing uses them.
        base += ["--without-gossip", "--without-mingle"]
        self.spawn(Child("worker", [*base, "-Q", "default", "-c", "2", "-n", "demo@%h"]))
        watch = [*base, "-Q", "watch", "-c", str(WATCH_SLOTS), "-n", "watch@%h"]
        self.spawn(Child("watcher", watch))
        return True

    def start_beat(self) -> bool:
        schedule = str(self.run_dir / "celerybeat-schedule")
        self.spawn(
            Child("beat", [self.python, "-m", "celery", "-A", "handoff", "beat", "-s", schedule])
        )
        return True

    def start_web(self) -> bool:
        try:
            self.port = free_port(self.host, self.port, tries=20)
        except OSError as exc:
            self.say(str(exc))
            self.exit_code = 1
            return False
        argv = [self.python, "manage.py", "serve", "-b", self.host, "-p", str(self.port)]
        self.spawn(Child("web", argv))
        return True

    def start_simulator(self) -> bool:
        """Serve the simulated cluster and register it, so the worker watches it
        through the kubernetes client exactly as it would a real one."""
        if not self.with_simulator:
            return True
        port = free_port()
        # Its own file, named for the cluster: no other simulator writes it.
        kubeconfig = self.run_dir / f"{DEMO_CLUSTER}.kubeconfig"
        kubeconfig.unlink(missing_ok=True)
        serve = ["--serve", f"127.0.0.1:{port}", "--kubeconfig", str(kubeconfig)]
        argv = [self.python, "manage.py", *SIMULATOR_ARGS, *serve]
        self.spawn(Child("simulator", argv, required=False))
        if not self.wait_for("simulator", lambda: kubeconfig.exists() and port_open(port)):
            return False
        # A fresh simulator starts its resourceVersions over: the previous run's data
        # for the demo cluster would make every new object look stale.
        self.manage("clusters", "remove", DEMO_CLUSTER, check=False)
        added = self.manage(
            "clusters", "add", DEMO_CLUSTER, "--kubeconfig", str(kubeconfig), "--start"
        )
        if not added:
            self.say(f"could not register the demo cluster; see {self.log_path('clusters')}")
        return True

    def watch_cluster(self) -> bool:
        """Register the given kubeconfig's cluster (read-only: Handoff only lists and
        watches) and start its streams, in place of the simulator."""
        if self.watch is None:
            return True
        name, kubeconfig, context = self.watch
        # Its data is kept: a new run goes on where the last one stopped.
        self.manage("clusters", "remove", name, "--keep-data", check=False)
        added = ["clusters", "add", name, "--kubeconfig", kubeconfig, "--start"]
        if not self.manage(*added, *(["--context", context] if context else [])):
            self.say(f"could not register {name}; see {self.log_path('clusters')}")
            self.exit_code = 1
            return False
        self.say(f"watching {name} (kubeconfig {kubeconfig}, read-only)")
        return True

    def manage(self, *args: str, check: bool = True) -> bool:
        """Run a short manage.py command to completion, logging to clusters.log."""
        child = Child("clusters", [self.python, "manage.py", *args])
        proc = self.popen(child)
        try:
            code = proc.wait(timeout=self.start_timeout)
        except subprocess.TimeoutExpired:
            stop_groups([(proc.pid, start_time(proc.pid) or 0)], self.stop_timeout)
            return False
        return code == 0 or not check

    def wait_until_serving(self) -> bool:
        if not self.wait_for("web", lambda: self.probe() is not None):
            return False
        demoenv.publish(self.run_dir, url=self.url, redis_url=self.redis_url)
        self.say(f"Handoff is running at {self.url}")
        self.say(f"logs: {self.run_dir}/*.log · stop: Ctrl-C")
        return True

    # -- helpers ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/"

    def child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.setdefault("HANDOFF_DEMO", "1")
        env.update(
            REDIS_URL=self.redis_url or "",
            HANDOFF_RUN_DIR=str(self.run_dir),
            DJANGO_SETTINGS_MODULE="handoff.settings",
            PYTHONUNBUFFERED="1",
        )
        return env

    def log_path(self, name: str) -> Path:
        return self.run_dir / f"{name}.log"

    def popen(self, child: Child) -> subprocess.Popen:
        with open(self.log_path(child.name), "ab") as log:
            return subprocess.Popen(
                child.argv,
                cwd=self.base_dir,
                env=self.child_env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Its own group: Ctrl-C reaches us, not it.
                preexec_fn=die_with_parent,
            )

    def spawn(self, child: Child) -> None:
        child.proc = self.popen(child)
        child.started = start_time(child.proc.pid) or 0
        self.children.append(child)
        self.write_pidfile()
        self.say(f"started {child.name} (pid {child.proc.pid}), log: {self.log_path(child.name)}")

    def wait_for(self, name: str, ready: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while not self.stopping and time.monotonic() < deadline:
            if ready():
                return True
            child = next((c for c in self.children if c.name == name), None)
            if child is not None and child.proc.poll() is not None:
                break
            time.sleep(0.2)
        if not self.stopping:
            self.say(f"{name} did not come up; see {self.log_path(name)}")
            self.exit_code = 1
        return False

    def redis_answers(self, port: int) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def probe(self) -> int | None:
        """HTTP status of /healthz, or None while nothing answers."""
        try:
            with urllib.request.urlopen(self.url + "healthz", timeout=2) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except (OSError, ValueError):
            return None

    def say(self, message: str) -> None:
        print(f"[demo] {message}", file=self.out, flush=True)

    # -- pidfile ---------------------------------------------------------------------------

    @property
    def pidfile(self) -> Path:
        return self.run_dir / PIDFILE

    def read_pidfile(self) -> dict | None:
        try:
            return json.loads(self.pidfile.read_text())
        except (OSError, ValueError):
            return None

    def write_pidfile(self) -> None:
        record = {
            "supervisor": {"pid": os.getpid(), "started": start_time(os.getpid())},
            "children": [
                {"name": c.name, "pid": c.proc.pid, "started": c.started} for c in self.children
            ],
        }
        tmp = self.pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.pidfile)

    def remove_pidfile(self) -> None:
        record = self.read_pidfile()
        if record and record.get("supervisor", {}).get("pid") == os.getpid():
            self.pidfile.unlink(missing_ok=True)
