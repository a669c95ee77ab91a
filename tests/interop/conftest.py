"""A cluster in the real test Redis, fed the way production feeds it: trace lines replayed
into its stream and folded by the fold worker's own code."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from handoff.core.trace import TraceWriter
from handoff.live import clusters, queries
from handoff.live.sources.playback import replay
from tests.live.helpers import fold_all

TRACES = Path(__file__).parent.parent / "data" / "traces"
NASTY = '</script><script>alert("x")</script>, "quoted"\nnext line'


def _nasty_trace(path: Path) -> Path:
    """A pod whose Event message and reason carry HTML, CSV metacharacters and a formula."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "weird",
            "namespace": "odd",
            "uid": "uid-weird",
            "resourceVersion": "5",
            "creationTimestamp": "2026-03-01T10:00:00Z",
        },
        "spec": {"nodeName": "worker-9", "containers": [{"name": "c", "image": "x"}]},
        "status": {
            "phase": "Failed",
            "reason": '=HYPERLINK("http://x")',
            "message": "Pod was rejected: " + NASTY,
            "startTime": "2026-03-01T10:00:01Z",
        },
    }
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "weird.1", "namespace": "odd", "uid": "ev-weird"},
        "involvedObject": {"kind": "Pod", "namespace": "odd", "name": "weird", "uid": "uid-weird"},
        "reason": "FailedMount",
        "message": NASTY,
        "type": "Warning",
        "source": {"component": "kubelet", "host": "worker-9"},
        "firstTimestamp": "2026-03-01T10:00:02Z",
        "lastTimestamp": "2026-03-01T10:00:02Z",
        "count": 1,
    }
    with TraceWriter(path) as writer:
        writer.write("2026-03-01T10:00:01.500000Z", "ADDED", pod)
        writer.write("2026-03-01T10:00:02.500000Z", "ADDED", event)
    return path


@pytest.fixture
def prod(redis_client, tmp_path):
    """Cluster ``prod``: every scripted trace in tests/data plus the nasty pod, folded."""
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name="prod", kind="trace"))
    for path in [*sorted(TRACES.glob("*.jsonl")), _nasty_trace(tmp_path / "nasty.jsonl")]:
        replay(redis_client, "prod", path)
    fold_all(redis_client, "prod")
    return queries.pod_views(redis_client, "prod")


@pytest.fixture
def signed_in(client, settings):
    settings.HANDOFF_DEMO = False
    client.force_login(User.objects.create_user("alice"))
    return client
