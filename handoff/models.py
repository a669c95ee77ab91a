"""Clusters Handoff watches. The database keeps how to reach each one — a kubeconfig
*path* and context, in-cluster, a simulator scenario or a trace — never credentials.
Workers read the configuration from Redis (``clusters.CLUSTERS``), which every save and
delete here writes through, so they need no database connection.
"""

from __future__ import annotations

import time

import redis
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from handoff import conf
from handoff.live import clusters, store
from handoff.live.push import GROUP_NAME_MAX, GROUP_PREFIX

NAME_RULE = RegexValidator(
    r"^[a-zA-Z0-9\-_.]+$",
    "Letters, digits, - _ and . only (it names a Channels group).",
)


class Cluster(models.Model):
    KUBECONFIG = "kubeconfig"
    IN_CLUSTER = "in-cluster"
    SIMULATOR = "simulator"
    TRACE = "trace"
    KINDS = [
        (KUBECONFIG, "kubeconfig file and context"),
        (IN_CLUSTER, "in-cluster service account"),
        (SIMULATOR, "built-in simulator"),
        (TRACE, "recorded trace (fed by replay)"),
    ]

    name = models.CharField(
        max_length=GROUP_NAME_MAX - len(GROUP_PREFIX), unique=True, validators=[NAME_RULE]
    )
    kind = models.CharField(max_length=20, choices=KINDS)
    kubeconfig = models.CharField(max_length=500, blank=True, help_text="path, not contents")
    context = models.CharField(max_length=200, blank=True)
    scenario = models.CharField(max_length=100, blank=True)
    trace = models.CharField(max_length=500, blank=True, help_text="path of the trace file")
    options = models.JSONField(default=dict, blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        config = self.config()
        with _redis() as client:
            clusters.register_cluster(client, config)
            # /healthz counts a stream that never got a holder from here.
            now = time.time()
            for stream in config.streams():
                store.note_stream(client, self.name, stream, registered=now)

    def delete(self, *args, **kwargs):
        result = super().delete(*args, **kwargs)
        with _redis() as client:
            clusters.unregister_cluster(client, self.name)
        return result

    def clean(self) -> None:
        if self.kind == self.KUBECONFIG and not self.kubeconfig:
            raise ValidationError({"kubeconfig": "A kubeconfig path is required."})
        if self.kind == self.SIMULATOR and not self.scenario:
            raise ValidationError({"scenario": "Name a simulator scenario."})

    def config(self) -> clusters.ClusterConfig:
        return clusters.ClusterConfig(
            name=self.name,
            kind=self.kind,
            kubeconfig=self.kubeconfig,
            context=self.context,
            scenario=self.scenario,
            trace=self.trace,
            options=dict(self.options or {}),
        )


def _redis() -> redis.Redis:
    return conf.redis_client()


def sync_registry() -> int:
    """Write every configured cluster to Redis (after Redis lost its data)."""
    rows = list(Cluster.objects.all())
    with _redis() as client:
        for row in rows:
            clusters.register_cluster(client, row.config())
    return len(rows)
