"""The one error the plugin reports: a line for the terminal, and kubectl's exit status."""

from __future__ import annotations


class PluginError(Exception):
    """Printed as ``error: <message>`` on one line; the command exits with 1."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))
