"""``manage.py status``: every watch stream's lag, lease holder, last error and rate, and
which streams are failing and why (the same judgement as /healthz). Exits 1 when one is."""

from __future__ import annotations

import time
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff import conf
from handoff.live import health, leases

COLUMNS = ("CLUSTER", "STREAM", "STATE", "HOLDER", "LAG", "EVENTS", "EVENTS/S", "LAST ERROR")


class Command(BaseCommand):
    help = "Show each watch stream: lag (now - last event), lease holder, last error, events/s."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--format", choices=("table", "json"), default="table")

    def handle(self, *args: Any, **options: Any) -> None:
        with conf.redis_client() as client:
            now = time.time()
            report = health.check_streams(client, now, conf.stream_limits())
            holders = {
                (name, stream): leases.holder(client, name, stream) or "-"
                for name, streams in report.items()
                for stream in streams
            }
        failing = health.failing_lines(report)
        if options["format"] == "json":
            for name, streams in report.items():
                for stream, s in streams.items():
                    s["holder"] = (
                        None if holders[(name, stream)] == "-" else holders[(name, stream)]
                    )
            self.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        else:
            self._table(report, holders)
            for line in failing:
                self.stdout.write(f"FAILING {line}")
        if failing:
            raise CommandError(f"{len(failing)} failing stream(s)")

    def _table(self, report: dict, holders: dict) -> None:
        rows = [COLUMNS]
        for name, streams in report.items():
            for stream, s in streams.items():
                rows.append(
                    (
                        name,
                        stream,
                        "ok" if s["ok"] else "FAILING",
                        holders[(name, stream)],
                        "-" if s["lag_s"] is None else f"{s['lag_s']}s",
                        str(s["events"]),
                        "-" if s["events_per_s"] is None else str(s["events_per_s"]),
                        _error(s),
                    )
                )
        if len(rows) == 1:
            self.stdout.write("no clusters configured (python manage.py clusters add ...)")
            return
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        for row in rows:
            self.stdout.write(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )


def _error(stream: dict) -> str:
    if not stream["last_error"]:
        return ""
    age = f" ({stream['error_age_s']}s ago)" if stream["error_age_s"] is not None else ""
    runs = f", {stream['failures']} in a row" if stream["failures"] else ""
    return f"{stream['last_error']}{age}{runs}"
