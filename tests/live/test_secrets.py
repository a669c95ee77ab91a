"""Env values, last-applied manifests and tokens never reach Redis, whatever the source."""

from __future__ import annotations

from pathlib import Path

from handoff.core.redact import REDACTED, scrub
from handoff.live.sources.playback import replay

from .helpers import everything_in, fold_all

SECRETS = Path(__file__).parent.parent / "data" / "traces" / "secrets.jsonl"


def _pod() -> dict:
    return {
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": '{"env": "hunter2"}',
                "example.com/api-token": "hunter2",
                "team": "payments",
            },
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "env": [
                        {"name": "DB_PASSWORD", "value": "hunter2"},
                        {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                    ],
                    "envFrom": [{"secretRef": {"name": "db", "optional": True}}],
                    "args": ["--password=hunter2"],
                }
            ],
            "initContainers": [{"name": "i", "env": [{"name": "T", "value": "hunter2"}]}],
        },
    }


def test_it_keeps_env_names_and_drops_their_values():
    pod = scrub(_pod())
    container = pod["spec"]["containers"][0]
    assert container["env"] == [
        {"name": "DB_PASSWORD", "value": REDACTED},
        {"name": "KEY", "value": REDACTED},
    ]
    assert container["envFrom"] == [{"secretRef": {"name": "db"}}]
    assert pod["spec"]["initContainers"][0]["env"] == [{"name": "T", "value": REDACTED}]
    assert pod["metadata"]["annotations"] == {"team": "payments"}
    assert "managedFields" not in pod["metadata"]
    assert "hunter2" not in repr(pod)


def test_a_replayed_trace_with_secrets_leaves_none_in_redis(redis_client):
    assert b"hunter2" in SECRETS.read_bytes()
    replay(redis_client, "c", SECRETS)
    folder = fold_all(redis_client, "c")
    folder.snapshot()
    blob = everything_in(redis_client)
    assert b"payments-api" in blob  # the pod itself is there
    assert b"hunter2" not in blob
    assert b"last-applied-configuration" not in blob
