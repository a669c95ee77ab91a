"""``manage.py record CLUSTER --out FILE [--duration S]``: trace v1 from the live stream."""

from __future__ import annotations

import time
from typing import Any

import redis
from django.core.management.base import BaseCommand, CommandError, CommandParser

from handoff import conf
from handoff.core.trace import TraceWriter
from handoff.live import clusters, store
from handoff.management.cliargs import at_least, writable


class Command(BaseCommand):
    help = "Write a cluster's watch events (what its stream retains, then live) as trace v1."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("cluster")
        parser.add_argument("--out", required=True, help="trace file (.gz compresses)")
        parser.add_argument(
            "--duration",
            type=float,
            default=0.0,
            help="seconds to keep following the live stream (default 0: what is retained)",
        )
        parser.add_argument("--since-now", action="store_true", help="skip the retained history")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["cluster"]
        at_least("--duration", options["duration"], 0.0)
        writable(options["out"], "--out")
        with conf.redis_client() as client:
            if clusters.cluster(client, name) is None and not client.exists(store.events_key(name)):
                raise CommandError(f"no cluster named {name!r}")
            cursor = "$" if options["since_now"] else "0-0"
            if cursor == "$":
                last = client.xrevrange(store.events_key(name), count=1)
                cursor = last[0][0].decode() if last else "0-0"
            with TraceWriter(options["out"], cluster=name, source=f"handoff:{name}") as writer:
                lines = record(client, name, writer, cursor, options["duration"])
        self.stdout.write(f"recorded {lines} events of {name} to {options['out']}")


def record(
    client: redis.Redis, cluster: str, writer: TraceWriter, after: str, duration: float
) -> int:
    lines = 0
    for entry_id, line in store.read_stream(client, cluster, after):
        writer.write_line(line)
        lines += 1
        after = entry_id
    deadline = time.monotonic() + duration
    key = store.events_key(cluster)
    while time.monotonic() < deadline:
        block = max(1, int(min(1.0, deadline - time.monotonic()) * 1000))
        reply = client.xread({key: after}, count=5000, block=block)
        for entry_id, fields in reply[0][1] if reply else []:
            writer.write_line(fields[store.STREAM_FIELD])
            lines += 1
            after = entry_id.decode()
    return lines
