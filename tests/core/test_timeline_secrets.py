"""What the timeline keeps is what it needs: secrets in pod specs never come out."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
from django.core.management import call_command

from handoff.offline.triage import fold_file, fold_trace

SECRETS = Path(__file__).parents[1] / "data" / "traces" / "secrets.jsonl"


def test_the_trace_really_carries_secrets():
    assert b"hunter2" in SECRETS.read_bytes()
    assert b"last-applied-configuration" in SECRETS.read_bytes()


def test_it_never_puts_env_values_or_annotations_in_the_report():
    blob = orjson.dumps(fold_trace(SECRETS))

    assert b"hunter2" not in blob
    assert b"last-applied" not in blob
    assert b"DB_PASSWORD" not in blob


def test_it_never_keeps_them_in_the_folded_state():
    timeline, _ = fold_file(SECRETS)
    state = repr(timeline.pods) + repr(timeline.nodes)

    assert "hunter2" not in state
    assert "last-applied" not in state


def test_it_never_prints_them():
    for fmt in ("table", "json"):
        out = io.StringIO()
        call_command("triage", "--trace", str(SECRETS), "--format", fmt, stdout=out)
        assert "hunter2" not in out.getvalue()
