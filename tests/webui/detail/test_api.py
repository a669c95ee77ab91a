"""The detail area's JSON API through Django, on views the real fold worker stored."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest
import redis
from django.contrib.auth.models import User

from handoff.core import viewcodec
from handoff.live import store
from handoff.live.pages.fleet import swimlane_bars
from tests.webui.detail.tracedata import HOSTILE, TRACES, fold_into_redis, hostile_trace
from webui.jsonbody import PACK_FROM, accepts_gzip

pytestmark = pytest.mark.django_db


@pytest.fixture
def signed_in(client):
    client.force_login(User.objects.create_user("alice", password="x"))
    return client


def test_it_answers_anonymous_api_calls_with_json_401(client, settings):
    settings.HANDOFF_DEMO = False
    for url in (
        "/api/clusters/c/pods/default/x",
        "/api/clusters/c/nodes",
        "/api/clusters/c/fleet",
        "/api/replay/f-x/summary",
    ):
        response = client.get(url)
        assert response.status_code == 401, url
        assert response.json() == {"error": "authentication required"}


def test_it_redirects_anonymous_page_visits_to_sign_in(client, settings):
    settings.HANDOFF_DEMO = False
    for url in ("/clusters/c/pods/default/x/", "/clusters/c/fleet/", "/replay/"):
        response = client.get(url)
        assert response.status_code == 302, url
        assert "/login" in response["Location"], url


def test_it_serves_a_pod_view_and_404s_unknown_ones(signed_in, redis_client: redis.Redis):
    fold_into_redis(
        redis_client, "c-serves-a-pod-view-and-404s-unk", TRACES / "rejected-outofcpu.jsonl"
    )
    view = signed_in.get(
        "/api/clusters/c-serves-a-pod-view-and-404s-unk/pods/default/bigcpu"
    ).json()
    assert view["verdict"] == "rejected"
    assert view["rejection"]["requested"] == 100000
    assert view["rejection"]["capacity"] == 4000
    assert any(e["reason"] == "OutOfcpu" for e in view["events"])
    assert (
        signed_in.get(
            f"/api/clusters/c-serves-a-pod-view-and-404s-unk/pods/default/bigcpu?uid={view['uid']}"
        ).json()
        == view
    )
    missing = signed_in.get("/api/clusters/c-serves-a-pod-view-and-404s-unk/pods/default/nope")
    assert missing.status_code == 404
    assert "nope" in missing.json()["error"]
    assert signed_in.get("/api/clusters/nowhere/pods/default/bigcpu").status_code == 404
    wrong_uid = signed_in.get(
        "/api/clusters/c-serves-a-pod-view-and-404s-unk/pods/default/bigcpu?uid=other"
    )
    assert wrong_uid.status_code == 404


def test_it_lists_pods_that_point_at_missing_nodes(signed_in, redis_client: redis.Redis):
    fold_into_redis(
        redis_client, "c-lists-pods-that-point-at-missi", TRACES / "stuck-node-missing.jsonl"
    )
    body = signed_in.get("/api/clusters/c-lists-pods-that-point-at-missi/nodes").json()
    assert {n["name"] for n in body["nodes"] if n["known"]} >= {"worker-1", "worker-3"}
    missing = {g["node"]: g for g in body["missing"]}
    assert "worker-2" in missing
    assert missing["worker-2"]["pods"][0]["name"] == "ghost5"
    assert missing["worker-2"]["pods"][0]["podgc"]["earliest"]
    worker1 = next(n for n in body["nodes"] if n["name"] == "worker-1")
    assert worker1["verdicts"].get("running") == 1


def test_it_keeps_node_readiness_history(signed_in, redis_client: redis.Redis):
    fold_into_redis(redis_client, "c-keeps-node-readiness-history", TRACES / "node-lost.jsonl")
    body = signed_in.get("/api/clusters/c-keeps-node-readiness-history/nodes").json()
    assert any(n["down"] for n in body["nodes"]), body["nodes"]


def test_it_aggregates_the_fleet(signed_in, redis_client: redis.Redis):
    fold_into_redis(redis_client, "c-aggregates-the-fleet", TRACES / "stuck-node-missing.jsonl")
    body = signed_in.get("/api/clusters/c-aggregates-the-fleet/fleet").json()
    assert body["pods"] == 2
    running = body["durations"]["create_to_running"]
    assert running["count"] == 1
    assert running["p50"] == running["p99"] > 0
    assert sum(running["histogram"]["counts"]) == 1
    assert running["ecdf"]["y"][-1] == 1.0
    assert "worker-2" in body["heatmap"]["nodes"]
    row = body["heatmap"]["nodes"].index("worker-2")
    awaiting = body["heatmap"]["failures"].index("awaiting-kubelet")
    assert body["heatmap"]["counts"][row][awaiting] == 1
    assert sum(body["heatmap"]["counts"][row]) == 1
    assert len(body["swimlane"]["lanes"]) == 2
    stages = {stage for bars in swimlane_bars(body["swimlane"]) for stage, _, _ in bars}
    assert {"awaiting-kubelet", "running"} <= stages


@pytest.mark.parametrize("path", ["fleet", "nodes"])
def test_the_shared_answers_go_gzipped_to_clients_that_accept_it_and_plain_to_others(
    signed_in, redis_client: redis.Redis, path: str
):
    cluster = f"c-gzips-the-{path}"
    fold_into_redis(redis_client, cluster, TRACES / "stuck-node-missing.jsonl")
    url = f"/api/clusters/{cluster}/{path}"
    plain = signed_in.get(url)
    assert "Content-Encoding" not in plain.headers
    assert "Accept-Encoding" in plain["Vary"]
    packed = signed_in.get(url, HTTP_ACCEPT_ENCODING="gzip, deflate, br, zstd")
    assert packed["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in packed["Vary"]
    assert int(packed["Content-Length"]) == len(packed.content)
    assert gzip.decompress(packed.content) == plain.content
    body = orjson.loads(plain.content)
    assert body["pods"] == 2 if path == "fleet" else "worker-2" in str(body["nodes"])
    refused = signed_in.get(url, HTTP_ACCEPT_ENCODING="gzip;q=0, *;q=1")
    assert "Content-Encoding" not in refused.headers
    assert refused.content == plain.content


def test_every_other_answer_larger_than_a_segment_is_packed_for_clients_that_accept_gzip(
    signed_in, redis_client: redis.Redis
):
    cluster = "c-packs-every-answer"
    fold_into_redis(redis_client, cluster, TRACES / "stuck-node-missing.jsonl")
    url = f"/api/clusters/{cluster}/pods"
    plain = signed_in.get(url)
    assert len(plain.content) > PACK_FROM
    assert "Content-Encoding" not in plain.headers
    packed = signed_in.get(url, HTTP_ACCEPT_ENCODING="gzip")
    assert packed["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in packed["Vary"]
    assert len(packed.content) < len(plain.content)
    body = orjson.loads(gzip.decompress(packed.content))
    assert body["pods"] == orjson.loads(plain.content)["pods"]
    assert body["total"] == 2
    # Small answers (here an error) go plain: packing them would save no round trip.
    missing = signed_in.get(
        f"/api/clusters/{cluster}/pods/default/nobody", HTTP_ACCEPT_ENCODING="gzip"
    )
    assert missing.status_code == 404
    assert "Content-Encoding" not in missing.headers
    assert missing.json()["error"]


@pytest.mark.parametrize(
    ("header", "gzip_ok"),
    [
        ("gzip", True),
        ("GZIP", True),
        ("deflate, gzip;q=0.5", True),
        ("x-gzip", True),
        ("*", True),
        ("br, *;q=0.1", True),
        ("", False),
        ("identity", False),
        ("deflate, br", False),
        ("gzip;q=0", False),
        ("gzip;q=0.000", False),
        ("gzip;q=0, *", False),
        ("*;q=0", False),
        ("gzip;q=abc", False),
        ("gzip;q=2", False),
        ("gzipped", False),
    ],
)
def test_accept_encoding_is_read_as_rfc_9110_says(header: str, gzip_ok: bool):
    assert accepts_gzip(header) is gzip_ok


def test_it_refuses_bad_times_and_unknown_traces(signed_in, settings, tmp_path: Path):
    settings.HANDOFF_REPLAY_DIR = str(TRACES)
    bad = signed_in.get("/api/replay/f-rejected-outofcpu.jsonl/summary?at=yesterday")
    assert bad.status_code == 400
    assert "RFC 3339" in bad.json()["error"]
    assert signed_in.get("/api/replay/f-..%2Fsecrets/summary").status_code == 404
    assert signed_in.get("/api/replay/f-README.md").status_code == 404
    assert signed_in.get("/api/replay/x-expected.json").status_code == 404


@pytest.mark.parametrize(
    "content",
    [b"", b"hello\nworld\n", b'{"handoff_trace":1,"cluster":"x"}\n', b"\x1f\x8b\x08broken"],
    ids=["empty", "not-json", "header-only", "broken-gzip"],
)
def test_it_answers_a_bad_server_side_trace_as_a_bad_upload(
    signed_in, settings, tmp_path: Path, content: bytes
):
    """An unusable file in HANDOFF_REPLAY_DIR: the pages and the API say why in one line,
    as they do for a refused upload (400, never a 500 or a debug page)."""
    settings.HANDOFF_REPLAY_DIR = str(tmp_path)
    (tmp_path / "bad.jsonl").write_bytes(content)
    for url in ("/replay/f-bad.jsonl/", "/replay/f-bad.jsonl/fleet/", "/replay/f-bad.jsonl/nodes/"):
        page = signed_in.get(url)
        assert page.status_code == 400, url
        text = page.content.decode()
        assert "not a Handoff trace" in text or "could not be read" in text
        assert "Traceback" not in text
    answer = signed_in.get("/api/replay/f-bad.jsonl/summary")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error.startswith(("not a Handoff trace", "the file could not be read"))
    assert "\n" not in error


def test_it_replays_a_server_side_trace_at_a_time(signed_in, settings):
    settings.HANDOFF_REPLAY_DIR = str(TRACES)
    trace = "f-stuck-node-missing.jsonl"
    meta = signed_in.get(f"/api/replay/{trace}").json()
    assert meta["cluster"]
    assert meta["start"] < meta["end"]
    early = signed_in.get(f"/api/replay/{trace}/summary?at=2026-03-01T12:30:02Z").json()
    late = signed_in.get(f"/api/replay/{trace}/summary").json()
    assert early["kind"] == "replay"
    assert early["summary"]["attention"] == 1
    assert early["summary"]["pods"] == 1
    assert late["summary"]["pods"] == 2
    pod_early = signed_in.get(
        f"/api/replay/{trace}/pods/default/ghost5?at=2026-03-01T12:30:02Z"
    ).json()
    # Past the trace's last event the state stays, but time-based verdicts move on.
    pod_late = signed_in.get(f"/api/replay/{trace}/pods/default/ghost5?at=2026-03-01T12:31:30Z")
    assert pod_early["verdict"] == "awaiting-kubelet"
    assert (pod_late.json()["verdict"], pod_late.json()["reason"]) == ("stuck", "node-missing")
    listed = signed_in.get(f"/api/replay/{trace}/pods?verdict=running").json()
    assert [p["name"] for p in listed["pods"]] == ["status-5d8f7c9b6-d2gz2"]
    assert signed_in.get(f"/api/replay/{trace}/nodes").json()["missing"]
    assert signed_in.get(f"/api/replay/{trace}/fleet").json()["pods"] == 2


def test_it_keeps_hostile_strings_as_data(signed_in, redis_client: redis.Redis, tmp_path):
    fold_into_redis(
        redis_client, "c-keeps-hostile-strings-as-data", hostile_trace(tmp_path / "hostile.jsonl")
    )
    view = signed_in.get("/api/clusters/c-keeps-hostile-strings-as-data/pods/default/bigcpu").json()
    assert any(e["message"] == HOSTILE for e in view["events"])
    page = signed_in.get(
        "/clusters/c-keeps-hostile-strings-as-data/pods/default/bigcpu/"
    ).content.decode()
    assert HOSTILE not in page


def test_it_limits_uploads(signed_in, settings, tmp_path: Path):
    settings.HANDOFF_REPLAY_MAX_UPLOAD_BYTES = 1024
    settings.HANDOFF_REPLAY_UPLOAD_DIR = str(tmp_path)
    big = (TRACES / "stuck-node-missing.jsonl").open("rb")
    response = signed_in.post("/replay/", {"trace": big})
    assert response.status_code == 413
    assert b"1024" in response.content or b"limit" in response.content
    assert list(tmp_path.iterdir()) == []


def test_it_stores_an_upload_and_refuses_what_is_not_a_trace(signed_in, settings, tmp_path):
    settings.HANDOFF_REPLAY_UPLOAD_DIR = str(tmp_path)
    with (TRACES / "rejected-outofcpu.jsonl").open("rb") as upload:
        response = signed_in.post("/replay/", {"trace": upload})
    assert response.status_code == 302
    trace_id = response["Location"].rstrip("/").rsplit("/", 1)[1]
    assert trace_id.startswith("u-")
    assert signed_in.get(f"/api/replay/{trace_id}").json()["cluster"] == "kind-manual"
    junk = tmp_path / "junk.txt"
    junk.write_bytes(b"hello\nworld\n")
    with junk.open("rb") as upload:
        refused = signed_in.post("/replay/", {"trace": upload})
    assert refused.status_code == 400
    assert b"not a Handoff trace" in refused.content


def test_it_picks_the_newest_of_a_reused_name_and_any_by_uid(signed_in, redis_client):
    fold_into_redis(redis_client, "c-reused", TRACES / "recreated-same-name.jsonl")
    uids = [
        view["uid"]
        for view in map(viewcodec.decode_view, redis_client.hvals(store.pods_key("c-reused")))
    ]
    assert len(uids) == 2
    body = signed_in.get("/api/clusters/c-reused/pods/data/db-0").json()
    assert len(body["same_name"]) == 1
    other = body["same_name"][0]
    assert other["created"] <= body["milestones"]["created"]
    older = signed_in.get(f"/api/clusters/c-reused/pods/data/db-0?uid={other['uid']}").json()
    assert older["uid"] == other["uid"]
    assert older["same_name"][0]["uid"] == body["uid"]


def test_it_attaches_the_watch_gaps_of_the_pods_life(signed_in, redis_client):
    fold_into_redis(redis_client, "c-gaps", TRACES / "stuck-node-missing.jsonl")
    # As handoff/sources/watching.py records a relist after a gap (newest first).
    for gap in (
        {"stream": "pods", "from": "2026-03-01T12:00:00.000000Z", "to": "2026-03-01T12:10:00Z"},
        {"stream": "events", "from": "2026-03-01T12:30:05.000000Z", "to": "2026-03-01T12:30:09Z"},
    ):
        redis_client.lpush(store.blind_key("c-gaps"), orjson.dumps(gap))
    view = signed_in.get("/api/clusters/c-gaps/pods/default/ghost5").json()
    assert [g["stream"] for g in view["watch_gaps"]] == ["events"]
