"""The interop tests' cluster (every scripted trace, folded into the real test Redis) is
what the rule and dashboard queries are checked against."""

from __future__ import annotations

import time

import pytest

from handoff.live import clusters, store
from tests.interop.conftest import prod  # noqa: F401  (a fixture, used by name)

from .tools import Exported, exported


@pytest.fixture
def exported_metrics(redis_client, prod) -> Exported:  # noqa: F811
    """Every family /metrics renders, each with samples: the fold stream has run too."""
    now = time.time()
    store.note_stream(
        redis_client, "prod", clusters.FOLD, last_event=now - 5, events=10, started=now - 60
    )
    return exported(redis_client)
