"""The answer builder (``pages/builder``): builds the fleet and nodes answers viewers want
from what the real fold stored, rebuilds them when a flush changed the store (at most once
per SHARED_TTL) and not otherwise; the web sends its bytes, or builds when it is gone."""

from __future__ import annotations

import gzip
import threading
import time

import orjson
import pytest
import redis
from django.contrib.auth.models import User

from handoff.live import answers, queries, store
from handoff.live.fold import FoldSettings
from handoff.live.pages import stored
from handoff.live.pages.builder import AnswerBuilder
from handoff.live.pages.fleet import SWIMLANE_LIMIT, kept_fleet
from handoff.live.pages.nodes import kept
from handoff.live.pages.rows import row_from_view
from tests.conftest import wait_until
from tests.webui.detail.tracedata import TRACES, fold_into_redis

FLEET = stored.fleet_kind(SWIMLANE_LIMIT)


def want(client: redis.Redis, cluster: str, *kinds: str) -> None:
    """What a web process's look leaves: these answers were asked for just now."""
    for kind in kinds:
        client.hset(answers.WANTED_KEY, answers.wanted_field(cluster, kind), repr(time.time()))


def sent(client: redis.Redis, cluster: str, kind: str) -> bytes | None:
    """The answer's JSON as kept (gzip-packed, after its header)."""
    raw = client.get(answers.answer_key(cluster, kind))
    return None if raw is None else gzip.decompress(raw[answers._HEADER.size :])


def web_built(client: redis.Redis, cluster: str, kind: str) -> bytes:
    """What the web built in its own process before the builder (webui's views, then)."""
    if kind == stored.NODES:
        fold = queries.fold_nodes(client, cluster)

        def on_missing(names: list[str]):
            return map(row_from_view, queries.on_missing_nodes(client, cluster, names))

        body = kept(
            queries.handed(client, cluster), fold["nodes"], on_missing, fold["evaluated_at"]
        )
    else:
        body = kept_fleet(
            queries.fleet_kept(client, cluster, SWIMLANE_LIMIT),
            lambda nodes: queries.node_histograms(client, cluster, nodes),
        )
    return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)


def more_pods(client: redis.Redis, folder, trace: str) -> None:
    """Another trace's lines on the same cluster's stream, folded and flushed."""
    lines = [
        line for line in (TRACES / trace).read_bytes().splitlines() if b"handoff_trace" not in line
    ]
    store.append(client, folder.cluster, lines)
    while folder.step():
        pass
    folder.flush()


def test_the_answers_appear_after_the_fold_flushed_and_equal_the_webs(redis_client):
    fold_into_redis(redis_client, "c-built", TRACES / "stuck-node-missing.jsonl")
    want(redis_client, "c-built", FLEET, stored.NODES)
    assert AnswerBuilder(redis_client).step() == 2
    for kind in (FLEET, stored.NODES):
        assert sent(redis_client, "c-built", kind) == web_built(redis_client, "c-built", kind)
    assert orjson.loads(sent(redis_client, "c-built", FLEET))["pods"] == 2


def test_a_flush_that_changed_the_store_has_them_built_again_once_per_ttl(redis_client):
    folder = fold_into_redis(redis_client, "c-moves", TRACES / "stuck-node-missing.jsonl")
    want(redis_client, "c-moves", FLEET, stored.NODES)
    builder = AnswerBuilder(redis_client)
    assert builder.step() == 2
    before = sent(redis_client, "c-moves", FLEET)
    assert builder.step() == 0  # the store rests: nothing built
    more_pods(redis_client, folder, "scheduled-running.jsonl")
    assert builder.step() == 0  # built less than SHARED_TTL ago
    time.sleep(answers.SHARED_TTL + 0.1)
    assert builder.step() == 2
    after = sent(redis_client, "c-moves", FLEET)
    assert after != before
    assert orjson.loads(after)["pods"] > 2
    for kind in (FLEET, stored.NODES):
        assert sent(redis_client, "c-moves", kind) == web_built(redis_client, "c-moves", kind)


def test_pods_retention_dropped_between_flushes_have_them_built_again(redis_client):
    folder = fold_into_redis(redis_client, "c-retained", TRACES / "deleted.jsonl")
    want(redis_client, "c-retained", FLEET, stored.NODES)
    builder = AnswerBuilder(redis_client)
    assert builder.step() == 2
    before = orjson.loads(sent(redis_client, "c-retained", FLEET))["pods"]
    folder.settings = FoldSettings(block_ms=1, retention_hours=0.0)
    folder.retain()  # drops the deleted pods without a flush
    time.sleep(answers.SHARED_TTL + 0.1)
    assert builder.step() == 2
    assert orjson.loads(sent(redis_client, "c-retained", FLEET))["pods"] < before
    for kind in (FLEET, stored.NODES):
        assert sent(redis_client, "c-retained", kind) == web_built(redis_client, "c-retained", kind)


def test_only_answers_someone_looked_at_lately_are_built(redis_client, monkeypatch):
    fold_into_redis(redis_client, "c-unwanted", TRACES / "stuck-node-missing.jsonl")
    assert AnswerBuilder(redis_client).step() == 0
    want(redis_client, "c-unwanted", stored.NODES, "no-such-page")
    monkeypatch.setattr(answers, "WANTED", 0.2)
    time.sleep(0.3)
    assert AnswerBuilder(redis_client).step() == 0
    assert redis_client.hlen(answers.WANTED_KEY) == 0  # forgotten


def test_a_store_no_fold_wrote_is_left_to_the_web(redis_client):
    want(redis_client, "c-nofold", stored.NODES)
    assert AnswerBuilder(redis_client).step() == 0
    assert sent(redis_client, "c-nofold", stored.NODES) is None


def test_while_it_runs_its_heartbeat_lasts_and_it_is_gone_when_it_stops(redis_client):
    stop = threading.Event()
    runner = threading.Thread(target=AnswerBuilder(redis_client).run, args=(stop,))
    runner.start()
    try:
        wait_until(lambda: redis_client.exists(answers.BUILDER_KEY), 5, "the heartbeat")
    finally:
        stop.set()
        runner.join(5)
    assert not redis_client.exists(answers.BUILDER_KEY)


@pytest.fixture
def signed_in(client):
    client.force_login(User.objects.create_user("alice", password="x"))
    return client


@pytest.mark.django_db
def test_the_web_sends_the_builders_bytes_and_builds_when_none_runs(signed_in, redis_client):
    folder = fold_into_redis(redis_client, "c-web", TRACES / "stuck-node-missing.jsonl")
    answers._memo.clear()
    # No builder: the web builds, and notes that the answer was asked for.
    first = signed_in.get("/api/clusters/c-web/fleet").content
    assert first == web_built(redis_client, "c-web", FLEET)
    builder = AnswerBuilder(redis_client)
    more_pods(redis_client, folder, "scheduled-running.jsonl")
    time.sleep(answers.SHARED_TTL + 0.1)
    redis_client.set(answers.BUILDER_KEY, b"test", px=60_000)
    assert signed_in.get("/api/clusters/c-web/fleet").content == first  # not built here
    assert builder.step() == 1
    time.sleep(answers.SHARED_TTL + 0.1)
    assert signed_in.get("/api/clusters/c-web/fleet").content == web_built(
        redis_client, "c-web", FLEET
    )
    assert orjson.loads(signed_in.get("/api/clusters/c-web/nodes").content) == orjson.loads(
        web_built(redis_client, "c-web", stored.NODES)
    )
