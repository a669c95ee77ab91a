"""The one line every command prints when Redis does not answer, instead of a traceback."""

from __future__ import annotations

import urllib.parse

import kombu.exceptions
import redis
from django.conf import settings

# What a command meets when the store (or the Celery broker on it) is not there.
UNREACHABLE: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    kombu.exceptions.OperationalError,
)


def explain(exc: BaseException | None = None) -> str:
    """``cannot reach Redis at URL (from where): what to do``."""
    source = settings.REDIS_URL_FROM
    if source == "REDIS_URL":
        hint = "check that it runs, or fix REDIS_URL"
    elif source == "the default":
        hint = "start `make demo` in this checkout (it publishes its Redis), or set REDIS_URL"
    else:
        hint = "the demo that published it is not answering: restart `make demo`"
    return f"cannot reach Redis at {without_password(settings.REDIS_URL)} (from {source}): {hint}"


def without_password(url: str) -> str:
    """The URL as it may be printed: a password in it becomes ``***``."""
    parts = urllib.parse.urlsplit(url)
    if not parts.password:
        return url
    user = f"{parts.username}:***@" if parts.username else ":***@"
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=user + host))


def database_problem(exc: BaseException) -> str:
    """The database refused: most often a fresh checkout that was never migrated."""
    where = settings.DATABASES["default"].get("NAME")
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if "no such table" in first or "does not exist" in first:
        return f"the database {where} has no tables yet ({first}): run `python manage.py migrate`"
    return f"the database {where} refused: {first}"
