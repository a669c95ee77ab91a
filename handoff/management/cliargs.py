"""Small argument and terminal helpers shared by the management commands."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError


def speed(text: str) -> float | None:
    """``--speed``: a positive factor of wall-clock time, or ``max`` (None: flat out)."""
    if text == "max":
        return None
    try:
        value = float(text)
    except ValueError as exc:
        raise CommandError(f"--speed takes a number or 'max', not {text!r}") from exc
    if value <= 0:
        raise CommandError("--speed must be positive")
    return value


def is_tty(stream: Any) -> bool:
    """Whether a command's output stream (Django's OutputWrapper or a file) is a terminal."""
    isatty = getattr(getattr(stream, "_out", stream), "isatty", None)
    return bool(isatty and isatty())


def at_least(option: str, value: float | None, low: float, *, above: bool = False) -> None:
    """An option's number in range, else one line (exit 1): ``--stuck-after -1``."""
    if value is None:
        return
    if value < low or (above and value == low):
        bound = f"more than {low:g}" if above else f"at least {low:g}"
        raise CommandError(f"{option} must be {bound}, not {value:g}")


def writable(path: str | Path, option: str) -> None:
    """A file a command will write: its directory exists and can be written, checked
    before any work is done (``record --out missing-dir/x.jsonl``)."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise CommandError(f"cannot write {option} {path}: it is a directory")
    if not parent.is_dir():
        raise CommandError(f"cannot write {option} {path}: no directory {parent}")
    if not os.access(parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise CommandError(f"cannot write {option} {path}: permission denied")


def readable(path: str | Path, option: str = "") -> None:
    """A file a command will read exists and can be read (exit 1 with the reason)."""
    where = f"{option} {path}" if option else str(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise CommandError(f"cannot read {where}: {exc.strerror or exc}") from exc
    if Path(path).is_dir():
        raise CommandError(f"cannot read {where}: it is a directory")


NOTHING_USABLE = 2  # exit status when an input holds nothing to work on (docs/cli.md)


def nothing_usable(path: str | Path, why: str = "") -> str:
    """The one line for an input without a single watch event (exit NOTHING_USABLE)."""
    return f"{path}: nothing usable in it{f' ({why})' if why else ''}: no watch event or object"


def reader_format(reader: Any) -> str:
    """What an input looked like: ``empty``, ``trace``, ``snapshot``, ``audit``..."""
    return getattr(reader, "format", None) or "trace"


def port(value: int, option: str = "--port") -> int:
    """A TCP port (0 lets the system choose one)."""
    if not 0 <= value <= 65535:
        raise CommandError(f"{option} must be a TCP port (0-65535), not {value}")
    return value


def address(text: str, option: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) as host and port, else one line (exit 1)."""
    host, sep, number = text.rpartition(":")
    if not sep or not host or not number.isdigit():
        raise CommandError(f"{option} takes HOST:PORT (e.g. 127.0.0.1:8080), not {text!r}")
    return host.strip("[]"), port(int(number), option)


def why_nothing(reader: Any) -> str:
    """Why an input had nothing usable: bad lines only, what it held instead, or its kind."""
    if getattr(reader, "errors", None):
        return "only bad lines"
    skipped = getattr(reader, "skipped", None) or {}
    if skipped:
        held = ", ".join(f"{name} {count}" for name, count in sorted(skipped.items()))
        return f"{reader_format(reader)} input holding only what Handoff skips: {held}"
    return f"{reader_format(reader)} input"
