"""Small argument and terminal helpers shared by the management commands."""

from __future__ import annotations

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
