"""`python manage.py serve`: the web as several Daphne processes sharing one listening socket.

One Daphne process runs every Django view on one thread, so fifty people opening pages at
once queue behind each other on one core. This command opens the socket once and hands it
(``daphne --fd``) to ``--processes`` children: each new connection goes to whichever child
accepts it first, usually an idle one. Websocket frames reach every child through the Redis
channel layer, so a board subscriber may sit on any of them. A child that exits stops the
others and the command (exit status of that child): the container runtime, Kubernetes or
``manage.py demo`` restarts the whole web, as it would a single Daphne.

Beside them runs one more child, the answer builder (``manage.py answers``): it builds the
fleet and nodes answers every Daphne process sends, so none of them holds its GIL for a
build while it serves requests (``handoff/live/answers.py``). ``--no-answer-builder``
leaves it out; the Daphne processes then build those answers themselves.

While a fold is behind its stream, the web yields busy cores to it: this command, when it
leads its session, puts the session at ``--nice`` (``HANDOFF_WEB_NICE``) until every fold
has caught up (``handoff/live/yielding.py``), so fifty page loads in flight cannot starve
ingestion on shared cores, and at other times the pages keep their latency.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import sys
import time
from types import FrameType

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.conf import redis_client
from handoff.live import yielding
from handoff.management.cliargs import port

APPLICATION = "handoff.asgi:application"
STOP_TIMEOUT = 10.0  # seconds the children get to close their connections
PR_SET_PDEATHSIG = 1  # linux/prctl.h
NICE_RANGE = range(20)  # raising one's own priority (a negative nice) needs CAP_SYS_NICE
YIELD_CHECK_S = 0.5  # how often the folds' lag is looked at


def listening_socket(host: str, number: int, backlog: int = 1024) -> socket.socket:
    """A bound, listening IPv4 socket the children inherit (Daphne's ``--fd`` adopts IPv4
    sockets only)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, number))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


def daphne_argv(fd: int, application: str) -> list[str]:
    """One child: Daphne adopting the inherited socket ``fd``."""
    return [sys.executable, "-m", "daphne", "--fd", str(fd), application]


def builder_argv() -> list[str]:
    """The answer builder, with this command's settings."""
    return [sys.executable, "-m", "django", "answers", "--settings", settings.SETTINGS_MODULE]


def die_with_parent() -> None:
    """Between fork and exec: if this command is killed outright (SIGKILL, the OOM
    killer), the kernel sends the child SIGTERM rather than leave a Daphne serving the
    port with nobody to stop it."""
    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = "Serve pages and websockets with several Daphne processes on one port."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("-b", "--bind", default="127.0.0.1", help="address to listen on")
        parser.add_argument("-p", "--port", type=int, default=8000)
        parser.add_argument(
            "--processes",
            type=int,
            default=settings.HANDOFF_WEB_PROCESSES,
            help="Daphne processes (default HANDOFF_WEB_PROCESSES, else one per core)",
        )
        parser.add_argument("--application", default=APPLICATION)
        parser.add_argument(
            "--no-answer-builder",
            dest="answer_builder",
            action="store_false",
            help="no answer builder: the Daphne processes build the shared answers",
        )
        parser.add_argument(
            "--nice",
            type=int,
            default=settings.HANDOFF_WEB_NICE,
            help="the web's session's nice while a fold is behind, 0-19, 0 never yields "
            "(default HANDOFF_WEB_NICE)",
        )

    def handle(self, *args, **options) -> None:
        port(options["port"])
        count = options["processes"]
        if count < 1:
            raise CommandError("--processes must be at least 1")
        nice = options["nice"]
        if nice not in NICE_RANGE:
            raise CommandError(f"--nice must be 0 to 19, not {nice}")
        try:
            sock = listening_socket(options["bind"], options["port"])
        except OSError as exc:
            raise CommandError(
                f"cannot listen on {options['bind']}:{options['port']}: {exc}"
            ) from exc
        argv = daphne_argv(sock.fileno(), options["application"])
        stopping = catch_stop_signals()  # before the children: none is left without a parent
        yielder, priority = yielding_to_the_fold(nice)
        children = [
            subprocess.Popen(argv, pass_fds=(sock.fileno(),), preexec_fn=die_with_parent)
            for _ in range(count)
        ]
        sock.close()  # the children hold it now
        if options["answer_builder"]:
            children.append(subprocess.Popen(builder_argv(), preexec_fn=die_with_parent))
        self.stdout.write(
            f"serving on {options['bind']}:{options['port']} with {count} Daphne processes"
            + (" and the answer builder" if options["answer_builder"] else "")
            + f", {priority}",
        )
        sys.exit(supervise(children, stopping, yielder))


def yielding_to_the_fold(nice: int) -> tuple[yielding.Yielder | None, str]:
    """The yielder ``supervise`` checks, if this command may weigh its session; and what it
    does, for the line it prints."""
    if not nice:
        return None, "never yielding to the fold (--nice 0)"
    if not yielding.leads_its_session():
        return None, "not yielding to the fold: serve does not lead its session"
    yielder = yielding.Yielder(redis_client(timeout=2), nice)
    return yielder, f"yielding to a fold behind at nice +{nice}"


def catch_stop_signals() -> list[int]:
    """SIGTERM and SIGINT noted in the returned list instead of ending this process."""
    stopping: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    return stopping


def supervise(
    children: list[subprocess.Popen], stopping: list[int], yielder: yielding.Yielder | None = None
) -> int:
    """Wait until a stop signal or one child's exit, then stop them all; the exit status.
    Meanwhile the yielder, if any, looks at the folds every ``YIELD_CHECK_S``."""
    ended = None
    checked = 0.0
    while not stopping and ended is None:
        ended = next((c for c in children if c.poll() is not None), None)
        if yielder is not None and time.monotonic() - checked >= YIELD_CHECK_S:
            checked = time.monotonic()
            yielder.check()
        time.sleep(0.2)
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if ended is not None and not stopping:
        return ended.returncode or 1
    return 0
