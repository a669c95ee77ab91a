"""The replay page's upload limits: size (413, before the body is parsed), rate (429 per
user per hour, counted after CSRF), and what is kept (a scrubbed copy, bad lines still
reported at their line numbers)."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import orjson
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from webui.detail import traces

pytestmark = pytest.mark.django_db
TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "secrets.jsonl"


@pytest.fixture
def operator(django_user_model, settings, tmp_path, redis_client) -> Client:
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_REPLAY_UPLOAD_DIR = str(tmp_path / "uploads")
    client = Client()
    client.force_login(django_user_model.objects.create_user("uploader", password="x"))
    return client


def _upload(client: Client, body: bytes, name: str = "t.jsonl"):
    return client.post("/replay/", {"trace": SimpleUploadedFile(name, body)})


def test_uploads_beyond_the_hourly_limit_are_refused(operator: Client, settings) -> None:
    settings.HANDOFF_REPLAY_UPLOADS_PER_HOUR = 2
    body = TRACE.read_bytes()
    assert _upload(operator, body).status_code == 302
    assert _upload(operator, body).status_code == 302
    refused = _upload(operator, body)
    assert refused.status_code == 429
    assert b"uploads an hour" in refused.content


def test_a_forged_upload_uses_no_allowance(django_user_model, settings, tmp_path, redis_client):
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_REPLAY_UPLOAD_DIR = str(tmp_path / "uploads")
    settings.HANDOFF_REPLAY_UPLOADS_PER_HOUR = 1
    user = django_user_model.objects.create_user("victim", password="x")
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(user)
    for _ in range(3):
        assert _upload(forged, TRACE.read_bytes()).status_code == 403
    honest = Client()
    honest.force_login(user)
    assert _upload(honest, TRACE.read_bytes()).status_code == 302


def test_an_oversized_upload_is_refused_before_it_is_parsed(operator: Client, settings) -> None:
    settings.HANDOFF_REPLAY_MAX_UPLOAD_BYTES = 1024
    response = _upload(operator, TRACE.read_bytes() * 10)
    assert response.status_code == 413


def test_the_kept_copy_is_scrubbed_and_keeps_line_numbers(tmp_path: Path) -> None:
    lines = TRACE.read_bytes().splitlines()
    broken = [*lines[:3], b"{not json", *lines[3:]]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(broken) + b"\n")
    target = tmp_path / "out.trace"
    traces.scrub_trace(source, target)
    kept = gzip.decompress(target.read_bytes())
    assert b"hunter2" not in kept
    assert b"hunter2" in source.read_bytes()
    assert kept.count(b"\n") == len(broken)
    from handoff.core.trace import TraceReader

    reader = TraceReader(io.BytesIO(kept))
    events = list(reader)
    assert [e.line for e in reader.errors] == [4]
    assert len(events) == len(list(TraceReader(io.BytesIO(b"\n".join(lines) + b"\n"))))


def test_a_kubectl_list_upload_is_kept_as_a_scrubbed_trace(operator: Client, settings) -> None:
    pods = [
        orjson.loads(line)["object"]
        for line in TRACE.read_bytes().splitlines()
        if b'"kind":"Pod"' in line
    ]
    listing = orjson.dumps({"kind": "List", "apiVersion": "v1", "items": pods[-1:]})
    assert b"hunter2" in listing
    response = _upload(operator, listing, "pods.json")
    assert response.status_code == 302, response.content[:300]
    [stored] = Path(settings.HANDOFF_REPLAY_UPLOAD_DIR).iterdir()
    kept = gzip.decompress(stored.read_bytes())
    assert b"hunter2" not in kept
    assert kept.startswith(b'{"handoff_trace":1')
    page = operator.get(response["Location"])
    assert page.status_code == 200
