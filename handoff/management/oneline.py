"""The command line's last line of defence: an error no command turned into a message of
its own (Redis down, a database never migrated, a bug) ends in one line on stderr and exit
status 1, never a traceback. ``--traceback`` (Django's option) shows the traceback."""

from __future__ import annotations

import sys
import urllib.parse
from collections.abc import Sequence


def execute(argv: Sequence[str]) -> int:
    """Run a management command as ``manage.py`` does; the exit status."""
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(list(argv))
    except Exception as exc:  # SystemExit and KeyboardInterrupt pass through
        if "--traceback" in argv:
            raise
        command = argv[1] if len(argv) > 1 else "manage.py"
        sys.stderr.write(f"{command}: error: {describe(exc)} (--traceback shows where)\n")
        return 1
    return 0


def describe(exc: BaseException) -> str:
    """One line saying what failed, without credentials."""
    import redis

    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return f"Redis unreachable at {_redis_address()}: {_first_line(exc)}"
    text = _first_line(exc)
    if type(exc).__name__ == "OperationalError" and "no such table" in text:
        return f"the database is not set up ({text}): run python manage.py migrate"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or text}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else ""


def _redis_address() -> str:
    """host:port of REDIS_URL (never its password)."""
    try:
        from django.conf import settings

        parsed = urllib.parse.urlsplit(settings.REDIS_URL)
        return f"{parsed.hostname}:{parsed.port or 6379}"
    except Exception:
        return "REDIS_URL"
