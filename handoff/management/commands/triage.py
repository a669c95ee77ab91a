"""``manage.py triage --trace FILE``: where each pod's handoff stopped, offline."""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.core.report import build_report, build_rows, write_report_json
from handoff.core.trace import parse_time
from handoff.core.verdicts import VERDICT_NAMES
from handoff.interop.exporters.tables import render_table
from handoff.management.cliargs import (
    NOTHING_USABLE,
    at_least,
    is_tty,
    nothing_usable,
    why_nothing,
)
from handoff.offline.fanout import MAX_WORKERS, MIN_BYTES, FanOut, FanOutError, workers_for
from handoff.offline.triage import fold_file

MAX_ERRORS_PRINTED = 20


class Command(BaseCommand):
    help = "Fold a trace into per-pod handoff timelines and print their verdicts, worst first."
    # Offline: no database, no URLs, no web apps to check (manage.py runs it without
    # loading them, handoff.management.oneline).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--trace", help="trace v1 file (.jsonl or .jsonl.gz)")
        source.add_argument(
            "--cluster", help="a live cluster: its state in Redis (the fold's snapshot and stream)"
        )
        parser.add_argument(
            "--at", help="evaluate at this RFC 3339 time (default: the last observed time)"
        )
        parser.add_argument(
            "--stuck-after",
            type=float,
            default=60.0,
            help="seconds after binding before a pod not Running counts as stuck (default 60)",
        )
        parser.add_argument("--format", choices=("table", "json"), default="table")
        parser.add_argument(
            "--verdict",
            action="append",
            choices=VERDICT_NAMES,
            default=[],
            help="only pods with this verdict (repeatable)",
        )
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="processes to fold a trace file in (default: one per idle core, up to "
            f"{MAX_WORKERS}, for an uncompressed trace of {MIN_BYTES >> 20} MiB or more; "
            "1: one process)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        at = _parse_at(options["at"])
        at_least("--stuck-after", options["stuck_after"], 0.0)
        if options["cluster"]:
            self._print(_live_report(options["cluster"], at, options), options)
            return
        at_least("--workers", options["workers"], 1)
        out = _binary(self.stdout)
        fanned = None
        try:
            # In parallel when it pays; the indented JSON of a text stream (tests) is
            # only made whole, in one process.
            workers = workers_for(options["trace"], options["workers"])
            if workers > 1 and (options["format"] == "table" or out is not None):
                fanned = FanOut(
                    options["trace"],
                    workers,
                    at,
                    options["stuck_after"],
                    options["verdict"],
                    options["format"],
                )
                timeline, reader = fanned.timeline, fanned.reader
            else:
                timeline, reader = fold_file(options["trace"], until=at)
        except OSError as exc:
            raise CommandError(f"cannot read {options['trace']}: {exc.strerror or exc}") from exc
        except FanOutError as exc:
            raise CommandError(str(exc)) from exc
        try:
            self._report(timeline, reader, at, options, out, fanned)
        except FanOutError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            if fanned is not None:
                fanned.close()

    def _report(
        self,
        timeline: Any,
        reader: Any,
        at: float | None,
        options: dict[str, Any],
        out: Any,
        fanned: FanOut | None,
    ) -> None:
        """Bad lines to stderr, then the report (folded in one process or in ``fanned``)."""
        for error in reader.errors[:MAX_ERRORS_PRINTED]:
            self.stderr.write(f"{options['trace']}: {error}")
        if len(reader.errors) > MAX_ERRORS_PRINTED:
            self.stderr.write(f"... and {len(reader.errors) - MAX_ERRORS_PRINTED} more bad lines")
        if timeline.events_applied == 0 and not _read_later(options["trace"], at):
            self.stderr.write(nothing_usable(options["trace"], why_nothing(reader)))
            sys.exit(NOTHING_USABLE)
        if fanned is not None:
            if options["format"] == "json":
                fanned.write_json(out)
                out.flush()
            else:
                self._print(fanned.report_rows(), options)
            return
        if options["format"] == "json" and out is not None:
            # Written pod by pod: a trace of 100,000s of pods need not be held whole.
            write_report_json(
                out, timeline, at, options["stuck_after"], reader.errors, options["verdict"]
            )
            out.flush()
            return
        # The table shows a few fields of each pod: only those are made.
        build = build_report if options["format"] == "json" else build_rows
        report = build(
            timeline,
            at=at,
            stuck_after=options["stuck_after"],
            errors=reader.errors,
            only=options["verdict"],
        )
        self._print(report, options)

    def _print(self, report: dict[str, Any], options: dict[str, Any]) -> None:
        if options["format"] == "json":
            _write_bytes(self.stdout, orjson.dumps(report, option=orjson.OPT_INDENT_2) + b"\n")
        else:
            self.stdout.write(render_table(report, colour=_colour_wanted(self.stdout)))


def _live_report(cluster: str, at: float | None, options: dict[str, Any]) -> dict[str, Any]:
    """The same report from a live cluster: the fold's state rebuilt from Redis, judged at
    the time the fold last evaluated it (its cluster clock) unless --at says otherwise."""
    _django_ready()
    import redis

    from handoff import conf
    from handoff.live import clusters, store
    from handoff.live.fold import Folder
    from handoff.management.unreachable import explain

    try:
        with conf.redis_client() as client:
            known = clusters.cluster(client, cluster) is not None
            if not known and not client.exists(store.events_key(cluster)):
                raise CommandError(f"no cluster named {cluster!r} (python manage.py clusters list)")
            folder = Folder(client, cluster)
            folder.load()
            evaluated = store.fold_state(client, cluster).get("evaluated_at")
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        raise CommandError(explain(exc)) from exc
    except redis.RedisError as exc:
        raise CommandError(f"cannot read the live state from Redis: {exc}") from exc
    if at is None and evaluated:
        at = max(parse_time(evaluated), folder.timeline.last_observed or 0.0)
    report = build_report(
        folder.timeline, at=at, stuck_after=options["stuck_after"], only=options["verdict"]
    )
    for view in report["pods"]:
        view["deleted_blind"] = folder.blind.get(view["uid"] or "")
    return report


def _django_ready() -> None:
    """The live path reads its Redis settings through Django: load the apps when
    manage.py ran this command without them (``oneline.run_offline``)."""
    from django.apps import apps

    if not apps.ready:
        import django

        django.setup()


def _read_later(path: str, at: float | None) -> bool:
    """With --at before the first event nothing was folded: whether the file has events
    (0 pods at that time is then the answer) or none at all."""
    if at is None:
        return False
    timeline, _ = fold_file(path)
    return timeline.events_applied > 0


def _parse_at(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise CommandError(f"--at must be an RFC 3339 time, got {value!r}") from exc


def _binary(stream: Any) -> Any:
    """The binary stream under a command's stdout (None for a StringIO, as in tests)."""
    target = getattr(stream, "_out", stream)
    buffer = getattr(target, "buffer", None)
    if buffer is not None:
        target.flush()
    return buffer


def _write_bytes(stream: Any, data: bytes) -> None:
    """Large reports go to the binary stream underneath, skipping a text re-encode."""
    buffer = _binary(stream)
    if buffer is not None:
        buffer.write(data)
        buffer.flush()
    else:
        getattr(stream, "_out", stream).write(data.decode())


def _colour_wanted(stream: Any) -> bool:
    return is_tty(stream) and "NO_COLOR" not in os.environ
