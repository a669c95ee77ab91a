"""``manage.py clusters add|list|remove|sync``: the clusters Handoff watches."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import redis
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from handoff import conf
from handoff.live import clusters, store
from handoff.management import clustercheck
from handoff.models import Cluster, sync_registry


class Command(BaseCommand):
    help = "Add, list or remove the clusters Handoff watches."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        add = sub.add_parser("add", help="watch a cluster")
        add.add_argument("name")
        how = add.add_mutually_exclusive_group(required=True)
        how.add_argument(
            "--kubeconfig",
            metavar="PATH",
            help="a kubeconfig file (its path is stored, not its contents)",
        )
        how.add_argument("--in-cluster", action="store_true", help="this pod's service account")
        how.add_argument(
            "--simulator", metavar="SCENARIO", help="the built-in simulator, in a worker"
        )
        how.add_argument("--trace", metavar="FILE", help="a recorded trace (fed with `replay`)")
        add.add_argument("--context", default="", help="kubeconfig context (default: current)")
        add.add_argument("--seed", type=int, default=0, help="--simulator: RNG seed")
        add.add_argument("--speed", type=float, default=1.0, help="--simulator: virtual s per s")
        add.add_argument(
            "--start", action="store_true", help="start its streams now (else beat does)"
        )
        add.add_argument(
            "--no-check",
            action="store_true",
            help="do not ask the API for /version first (the files are still checked)",
        )
        sub.add_parser("list", help="the configured clusters")
        remove = sub.add_parser("remove", help="stop watching a cluster and drop its data")
        remove.add_argument("name")
        remove.add_argument("--keep-data", action="store_true", help="keep its Redis keys")
        sub.add_parser("sync", help="rewrite the workers' copy in Redis from the database")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, "_" + options["action"])(options)

    def _add(self, options: dict[str, Any]) -> None:
        """Check everything first, then save to the database and Redis together: a failure
        leaves nothing behind, and its message names the cause."""
        cluster = self._cluster(options)
        try:
            cluster.full_clean()
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            ) from exc
        try:
            where = self._check(cluster, reach=not options["no_check"])
        except clustercheck.Invalid as exc:
            raise CommandError(str(exc)) from exc
        with conf.redis_client() as client:
            client.ping()  # unreachable: one line from manage.py, nothing saved
            try:
                with transaction.atomic():
                    cluster.save()
                    if options["start"]:
                        from handoff.tasks import start_stream

                        for stream in cluster.config().streams():
                            start_stream(cluster.name, stream)
            except BaseException:
                clusters.unregister_cluster(client, cluster.name)
                raise
        self.stdout.write(f"added {cluster.name} ({where})")

    def _cluster(self, options: dict[str, Any]) -> Cluster:
        if Cluster.objects.filter(name=options["name"]).exists():
            raise CommandError(
                f"a cluster named {options['name']!r} exists already "
                f"(python manage.py clusters remove {options['name']} first)"
            )
        cluster = Cluster(name=options["name"], context=options["context"])
        if options["kubeconfig"]:
            cluster.kind = Cluster.KUBECONFIG
            cluster.kubeconfig = str(Path(options["kubeconfig"]).expanduser().resolve())
        elif options["in_cluster"]:
            cluster.kind = Cluster.IN_CLUSTER
        elif options["simulator"]:
            cluster.kind = Cluster.SIMULATOR
            cluster.scenario = options["simulator"]
            cluster.options = {"seed": options["seed"], "speed": options["speed"]}
        else:
            cluster.kind = Cluster.TRACE
            cluster.trace = str(Path(options["trace"]).expanduser().resolve())
        return cluster

    def _check(self, cluster: Cluster, reach: bool) -> str:
        """Raise clustercheck.Invalid unless the cluster can be watched; what it is, in words."""
        if cluster.kind == Cluster.KUBECONFIG:
            configuration, context = clustercheck.kubeconfig_context(
                cluster.kubeconfig, cluster.context
            )
            # The context checked is the one watched, even if the file's current one moves.
            cluster.context = context
            version = clustercheck.api_version(configuration) if reach else "not checked"
            self._note_api(cluster, configuration.host, version if reach else "")
            return f"kubeconfig · context {context} · {configuration.host} · {version}"
        if cluster.kind == Cluster.IN_CLUSTER:
            configuration = clustercheck.in_cluster()
            version = clustercheck.api_version(configuration) if reach else "not checked"
            self._note_api(cluster, configuration.host, version if reach else "")
            return f"in-cluster · {configuration.host} · {version}"
        if cluster.kind == Cluster.SIMULATOR:
            clustercheck.scenario(cluster.scenario)
            return f"simulator · {cluster.scenario}"
        found = clustercheck.trace_file(cluster.trace)
        return f"trace · {Path(cluster.trace).name} ({found})"

    @staticmethod
    def _note_api(cluster: Cluster, server: str, version: str) -> None:
        """Where the API is and what it said it is, for the pages' titles (no secret)."""
        cluster.options = {**cluster.options, "server": server}
        if version:
            cluster.options["version"] = version

    def _list(self, options: dict[str, Any]) -> None:
        rows = [("NAME", "KIND", "WHERE")]
        for cluster in Cluster.objects.all():
            where = {
                Cluster.KUBECONFIG: f"{cluster.kubeconfig}"
                + (f" ({cluster.context})" if cluster.context else ""),
                Cluster.IN_CLUSTER: "service account",
                Cluster.SIMULATOR: cluster.scenario,
                Cluster.TRACE: cluster.trace,
            }[cluster.kind]
            rows.append((cluster.name, cluster.kind, where))
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        for row in rows:
            self.stdout.write(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            )

    def _remove(self, options: dict[str, Any]) -> None:
        cluster = Cluster.objects.filter(name=options["name"]).first()
        if cluster is None:
            raise CommandError(f"no cluster named {options['name']!r}")
        with conf.redis_client() as client:
            client.ping()  # unreachable: one line from manage.py, the row stays
        cluster.delete()  # unregisters it: the stream hosts stop its streams within seconds
        if not options["keep_data"]:
            with conf.redis_client() as client:
                _wait_released(client, cluster.config())
                store.forget_cluster(client, options["name"])
        self.stdout.write(f"removed {options['name']}")

    def _sync(self, options: dict[str, Any]) -> None:
        self.stdout.write(f"{sync_registry()} clusters written to Redis")


def _wait_released(client: redis.Redis, config: clusters.ClusterConfig) -> None:
    """Until the cluster's streams have let go of their leases (a host reconciles every
    HANDOFF_HOST_INTERVAL; a dead holder's lease lapses after HANDOFF_LEASE_TTL), so no
    stream writes a key after its keys are deleted."""
    deadline = time.monotonic() + max(10.0, float(conf.lease_ttl()))
    keys = [store.lease_key(config.name, stream) for stream in config.streams()]
    while client.exists(*keys) and time.monotonic() < deadline:
        time.sleep(0.2)
