"""``manage.py export-otel --trace FILE | --cluster C  --out FILE.json | --endpoint URL``:
each pod's handoff as an OpenTelemetry trace (docs/interop.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.interop.exporters import otlp
from handoff.interop.importers import open_events
from handoff.management.cliargs import (
    NOTHING_USABLE,
    at_least,
    nothing_usable,
    readable,
    why_nothing,
    writable,
)

BATCH = 500  # pods per OTLP/HTTP request


class Command(BaseCommand):
    help = "Export each pod's handoff as an OpenTelemetry trace: OTLP JSON file or OTLP/HTTP."

    def add_arguments(self, parser: CommandParser) -> None:
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--trace", help="a trace or any input `convert` reads")
        source.add_argument("--cluster", help="a live cluster's stored pods (Redis)")
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--out", help="write OTLP JSON (an ExportTraceServiceRequest) here")
        target.add_argument(
            "--endpoint", help="POST OTLP/HTTP protobuf here, e.g. http://collector:4318/v1/traces"
        )
        parser.add_argument(
            "--header",
            action="append",
            default=[],
            help="extra HTTP header for --endpoint, NAME=VALUE (repeatable)",
        )
        parser.add_argument("--stuck-after", type=float, default=60.0)

    def handle(self, *args: Any, **options: Any) -> None:
        at_least("--stuck-after", options["stuck_after"], 0.0)
        headers = dict(_header(text) for text in options["header"])
        if options["out"]:
            writable(options["out"], "--out")
        if options["trace"]:
            readable(options["trace"], "--trace")
        cluster, views = self._views(options)
        if options["out"]:
            request = otlp.export_request(cluster, views)
            spans = len(request["resourceSpans"][0]["scopeSpans"][0]["spans"])
            Path(options["out"]).write_bytes(orjson.dumps(request) + b"\n")
            self.stdout.write(f"wrote {spans} spans to {options['out']}")
            return
        sent = 0
        batch: list[dict[str, Any]] = []
        for view in views:
            batch.append(view)
            if len(batch) >= BATCH:
                sent += self._post(options["endpoint"], cluster, batch, headers)
                batch = []
        sent += self._post(options["endpoint"], cluster, batch, headers)
        self.stdout.write(f"sent {sent} spans to {options['endpoint']}")

    def _post(
        self, endpoint: str, cluster: str, views: list[dict[str, Any]], headers: dict[str, str]
    ) -> int:
        if not views:
            return 0
        request = otlp.export_request(cluster, views)
        try:
            otlp.post(endpoint, otlp.to_protobuf(request), headers=headers)
        except otlp.ExportError as exc:
            raise CommandError(str(exc)) from exc
        return len(request["resourceSpans"][0]["scopeSpans"][0]["spans"])

    def _views(self, options: dict[str, Any]) -> tuple[str, Iterator[dict[str, Any]]]:
        if options["cluster"]:
            return options["cluster"], _stored_views(options["cluster"])
        path = options["trace"]
        reader = open_events(path)
        try:
            timeline = fold(reader)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc
        for error in reader.errors[:20]:
            self.stderr.write(f"{path}: {error}")
        if timeline.events_applied == 0:
            self.stderr.write(nothing_usable(path, why_nothing(reader)))
            sys.exit(NOTHING_USABLE)
        timeline.skipped.update(reader.skipped)
        cluster = (reader.header.cluster if reader.header else None) or Path(path).name
        report = build_report(timeline, stuck_after=options["stuck_after"])
        return cluster, iter(report["pods"])


def _stored_views(cluster: str) -> Iterator[dict[str, Any]]:
    import redis

    from handoff import conf
    from handoff.core import viewcodec
    from handoff.live import clusters, store

    client = conf.redis_client()
    try:
        if clusters.cluster(client, cluster) is None and not client.exists(store.pods_key(cluster)):
            raise CommandError(f"no cluster named {cluster!r} (python manage.py clusters list)")
        for _, raw in client.hscan_iter(store.pods_key(cluster), count=2000):
            yield viewcodec.decode_view(raw)
    except redis.RedisError as exc:
        raise CommandError(f"cannot read the stored pods from Redis: {exc}") from exc
    finally:
        client.close()


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise CommandError(f"--header takes NAME=VALUE, not {text!r}")
    return name.strip(), value.strip()
