"""``manage.py convert IN OUT``: any input the importers read (kubectl output, watch streams,
audit logs, trace v1) written as trace v1."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.core.trace import TraceWriter
from handoff.interop.importers import open_events
from handoff.management.cliargs import (
    NOTHING_USABLE,
    is_tty,
    nothing_usable,
    readable,
    why_nothing,
    writable,
)

MAX_ERRORS_PRINTED = 20
BAR_FROM_BYTES = 1 << 20  # a progress bar only for inputs of a MiB or more


class Command(BaseCommand):
    help = (
        "Convert kubectl -o json/yaml output, kubectl -w streams or kube-apiserver audit logs "
        "(gzip or not) to a trace v1 file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("input", help="the file to read; its format is found from its content")
        parser.add_argument("output", help="trace v1 to write (.gz compresses)")
        parser.add_argument("--cluster", help="cluster name for the trace header")

    def handle(self, *args: Any, **options: Any) -> None:
        source, target = Path(options["input"]), Path(options["output"])
        if source.resolve() == target.resolve():
            raise CommandError("input and output are the same file")
        readable(source)
        writable(target, "OUT")
        size = source.stat().st_size
        bar = _Bar(self.stderr) if is_tty(self.stderr) and size >= BAR_FROM_BYTES else None
        reader = open_events(source, on_progress=bar.show if bar else None)
        written = 0
        writer: TraceWriter | None = None
        try:
            for event in reader:
                if writer is None:
                    writer = self._writer(target, reader, options["cluster"])
                if event.raw is not None:
                    writer.write_line(event.raw)
                    written += 1
            if writer is None:
                writer = self._writer(target, reader, options["cluster"])
        except OSError as exc:
            raise CommandError(f"cannot convert {source}: {exc.strerror or exc}") from exc
        finally:
            if writer is not None:
                writer.close()
            if bar is not None:
                bar.done()
        self._report(source, reader, written)
        if written == 0:
            target.unlink(missing_ok=True)
            self.stderr.write(nothing_usable(source, why_nothing(reader)))
            sys.exit(NOTHING_USABLE)

    @staticmethod
    def _writer(target: Path, reader: Any, cluster: str | None) -> TraceWriter:
        """Opened at the first event, when a trace input's header has been read: its cluster
        and source carry over unless ``--cluster`` names another."""
        header = reader.header
        if cluster is None and header is not None:
            cluster = header.cluster
        source = header.source if header is not None and header.source else None
        return TraceWriter(target, cluster=cluster, source=source or f"import:{reader.format}")

    def _report(self, source: Path, reader: Any, written: int) -> None:
        for error in reader.errors[:MAX_ERRORS_PRINTED]:
            self.stderr.write(f"{source}: {error}")
        if len(reader.errors) > MAX_ERRORS_PRINTED:
            self.stderr.write(f"... and {len(reader.errors) - MAX_ERRORS_PRINTED} more bad lines")
        skipped = ", ".join(f"{name} {count}" for name, count in sorted(reader.skipped.items()))
        self.stdout.write(
            f"{source}: {reader.format} input, {written} watch events written"
            + (f"; skipped: {skipped}" if skipped else "")
        )


class _Bar:
    WIDTH = 40

    def __init__(self, stream: Any) -> None:
        self.out = getattr(stream, "_out", sys.stderr)
        self.shown = -1

    def show(self, done: int, total: int | None) -> None:
        fraction = min(1.0, done / total) if total else 0.0
        filled = int(self.WIDTH * fraction)
        if filled == self.shown:
            return
        self.shown = filled
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.out.write(f"\r[{bar}] {fraction:4.0%} of {total or 0} bytes")
        self.out.flush()

    def done(self) -> None:
        self.out.write("\n")
        self.out.flush()
