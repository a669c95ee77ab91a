"""The command line's last line of defence: an error no command turned into a message of
its own (Redis down, a database never migrated, a bug) ends in one line on stderr and exit
status 1, never a traceback. ``--traceback`` (Django's option) shows the traceback."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

# Commands that need neither the database nor the web apps: they run without Django's
# app registry (``django.setup()`` imports every installed app, Daphne and the admin
# included: most of a second before any work). A command that later needs more (triage
# --cluster reads Redis through the settings) sets Django up itself.
OFFLINE_COMMANDS = {"triage": "handoff.management.commands.triage"}


def execute(argv: Sequence[str]) -> int:
    """Run a management command as ``manage.py`` does; the exit status."""
    from django.core.management import execute_from_command_line

    try:
        if not run_offline(argv):
            execute_from_command_line(list(argv))
    except Exception as exc:  # SystemExit and KeyboardInterrupt pass through
        if "--traceback" in argv:
            raise
        sys.stderr.write(one_line(argv, exc) + "\n")
        return 1
    return 0


def run_offline(argv: Sequence[str]) -> bool:
    """Run an offline command straight from its class, as Django's utility would after
    ``django.setup()``; False (nothing run) when Django's own way must decide: another
    command, ``--settings``/``--pythonpath``, shell completion, or settings that do not
    load or do not install Handoff (Django then says what is wrong, as before)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    if len(argv) < 2 or argv[1] not in OFFLINE_COMMANDS or "DJANGO_AUTO_COMPLETE" in os.environ:
        return False
    if any(arg.startswith(("--settings", "--pythonpath")) for arg in argv[2:]):
        return False
    try:
        if "handoff" not in settings.INSTALLED_APPS:
            return False
    except (ImproperlyConfigured, ImportError):
        return False
    command = importlib.import_module(OFFLINE_COMMANDS[argv[1]]).Command()
    command.run_from_argv(list(argv))
    return True


def one_line(argv: Sequence[str], exc: BaseException) -> str:
    """Redis or the database not there: what was tried and what to do; anything else: the
    command, what failed, and how to see where."""
    from django.db import DatabaseError

    from handoff.management.unreachable import UNREACHABLE, database_problem, explain

    if isinstance(exc, UNREACHABLE):
        return explain(exc)  # the URL it tried (no password), where it came from, what to do
    if isinstance(exc, DatabaseError):
        return database_problem(exc)
    command = argv[1] if len(argv) > 1 else "manage.py"
    return f"{command}: error: {describe(exc)} (--traceback shows where)"


def describe(exc: BaseException) -> str:
    """One line saying what failed, without credentials."""
    text = _first_line(exc)
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or text}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else ""
