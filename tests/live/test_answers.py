"""Shared answers (``live/answers``): built once for every web process, again only when
the store moved on (its fold's ``flushed``), at most once per SHARED_TTL; by a web process
when no answer builder runs (``pages/builder``), else only by the builder."""

import threading
import time

import redis

from handoff.live import answers, store
from tests.conftest import wait_until


def counting(body: bytes) -> tuple[list[int], callable]:
    calls: list[int] = []

    def make() -> bytes:
        calls.append(1)
        return body

    return calls, make


def another_process() -> None:
    """What another web process starts with: nothing remembered."""
    answers._memo.clear()


def flushed(client: redis.Redis, cluster: str, at: float) -> None:
    """What a fold's flush leaves for the answers: the store's new version."""
    client.hset(store.fold_key(cluster), "flushed", repr(at))


def test_one_build_serves_every_process_until_the_ttl(redis_client):
    calls, make = counting(b'{"a":1}')
    assert answers.shared(redis_client, "c-one-build", "fleet", make) == b'{"a":1}'
    assert answers.shared(redis_client, "c-one-build", "fleet", make) == b'{"a":1}'
    another_process()
    assert answers.shared(redis_client, "c-one-build", "fleet", make) == b'{"a":1}'
    assert len(calls) == 1


def test_an_answer_to_a_store_that_rests_is_not_built_again(redis_client):
    flushed(redis_client, "c-rests", 1.0)
    calls, make = counting(b"once")
    assert answers.shared(redis_client, "c-rests", "fleet", make) == b"once"
    time.sleep(answers.SHARED_TTL + 0.1)
    another_process()
    assert answers.shared(redis_client, "c-rests", "fleet", make) == b"once"
    time.sleep(0.3)  # a renewing thread, had one started
    assert len(calls) == 1


def test_an_old_answer_is_sent_while_the_next_is_built(redis_client):
    bodies = iter([b"first", b"second"])
    calls: list[int] = []

    def make() -> bytes:
        calls.append(1)
        return next(bodies)

    flushed(redis_client, "c-renew", 1.0)
    assert answers.shared(redis_client, "c-renew", "fleet", make) == b"first"
    flushed(redis_client, "c-renew", 2.0)
    time.sleep(answers.SHARED_TTL + 0.1)
    another_process()
    # The store moved on: the last answer sent at once, the next built in a thread.
    assert answers.shared(redis_client, "c-renew", "fleet", make) == b"first"
    wait_until(lambda: len(calls) == 2, 5, "the next answer")
    wait_until(lambda: answers.shared(redis_client, "c-renew", "fleet", make) == b"second", 5, "it")
    assert len(calls) == 2


def test_an_answer_the_store_moved_past_keep_ago_is_never_sent(redis_client, monkeypatch):
    monkeypatch.setattr(answers, "KEEP", 0.3)
    monkeypatch.setattr(answers, "SHARED_TTL", 0.1)
    flushed(redis_client, "c-keep", 1.0)
    assert answers.shared(redis_client, "c-keep", "n", lambda: b"old") == b"old"
    flushed(redis_client, "c-keep", 2.0)
    time.sleep(0.4)
    assert answers.shared(redis_client, "c-keep", "n", lambda: b"new") == b"new"


def test_a_resting_answer_is_noted_current_so_it_stays_young(redis_client, monkeypatch):
    monkeypatch.setattr(answers, "KEEP", 0.4)
    monkeypatch.setattr(answers, "SHARED_TTL", 0.1)
    flushed(redis_client, "c-young", 1.0)
    assert answers.shared(redis_client, "c-young", "n", lambda: b"old") == b"old"
    time.sleep(0.3)  # past KEEP / 2: noted current again by this look
    assert answers.shared(redis_client, "c-young", "n", lambda: b"unused") == b"old"
    flushed(redis_client, "c-young", 2.0)
    time.sleep(0.2)  # the store moved on 0.2 s ago, the answer was current 0.2 s ago
    calls, make = counting(b"new")
    assert answers.shared(redis_client, "c-young", "n", make) == b"old"  # sent, renewed
    wait_until(lambda: calls, 5, "the renewal")


def test_with_a_builder_alive_a_web_process_builds_only_a_missing_answer(redis_client):
    redis_client.set(answers.BUILDER_KEY, b"elsewhere", px=60_000)
    flushed(redis_client, "c-builder", 1.0)
    assert answers.shared(redis_client, "c-builder", "fleet:5", lambda: b"first") == b"first"
    flushed(redis_client, "c-builder", 2.0)
    time.sleep(answers.SHARED_TTL + 0.1)
    another_process()
    calls, make = counting(b"second")
    assert answers.shared(redis_client, "c-builder", "fleet:5", make) == b"first"
    time.sleep(0.3)  # a renewing thread, had one started
    assert calls == []
    wanted = redis_client.hgetall(answers.WANTED_KEY)
    assert answers.wanted_field("c-builder", "fleet:5").encode() in wanted


def test_an_answer_is_built_at_most_once_per_ttl_whoever_asks(redis_client):
    flushed(redis_client, "c-rate", 1.0)
    assert answers.shared(redis_client, "c-rate", "n", lambda: b"first") == b"first"
    key = answers.answer_key("c-rate", "n")
    assert not answers.claim(redis_client, key)  # held on after the build
    time.sleep(answers.SHARED_TTL + 0.1)
    assert answers.claim(redis_client, key)


def test_kinds_and_clusters_are_apart(redis_client):
    assert answers.shared(redis_client, "c-apart", "fleet:10", lambda: b"1") == b"1"
    assert answers.shared(redis_client, "c-apart", "fleet:20", lambda: b"2") == b"2"
    assert answers.shared(redis_client, "c-apart-2", "fleet:10", lambda: b"3") == b"3"


def test_a_process_waits_for_the_one_building(redis_client, redis_url):
    other = redis.Redis.from_url(redis_url)
    started = threading.Event()

    def slow() -> bytes:
        started.set()
        time.sleep(0.5)
        return b"built once"

    builder = threading.Thread(target=answers.shared, args=(redis_client, "c-wait", "n", slow))
    builder.start()
    started.wait(5)
    calls, make = counting(b"built twice")
    assert answers.shared(other, "c-wait", "n", make) == b"built once"
    assert calls == []
    builder.join()
    other.close()


def test_a_builder_that_died_frees_the_others_after_the_wait(redis_client, monkeypatch):
    monkeypatch.setattr(answers, "BUILD_WAIT", 0.3)
    redis_client.set(answers.answer_key("c-died", "n") + ":building", b"1", px=60_000)
    started = time.monotonic()
    assert answers.shared(redis_client, "c-died", "n", lambda: b"mine") == b"mine"
    assert time.monotonic() - started >= 0.3


def test_an_answer_gone_from_redis_is_built_again(redis_client):
    assert answers.shared(redis_client, "c-gone", "n", lambda: b"before") == b"before"
    time.sleep(answers.SHARED_TTL + 0.1)
    redis_client.flushall()  # a removed cluster, or a cleared store
    assert answers.shared(redis_client, "c-gone", "n", lambda: b"after") == b"after"


def test_a_renewal_that_fails_is_a_log_line_and_the_last_answer_is_still_sent(redis_client, caplog):
    assert answers.shared(redis_client, "c-fails", "fleet", lambda: b"last") == b"last"
    flushed(redis_client, "c-fails", 2.0)
    time.sleep(answers.SHARED_TTL + 0.1)
    another_process()
    failed = threading.Event()

    def make() -> bytes:
        failed.set()
        raise redis.ConnectionError("Redis went away")

    with caplog.at_level("WARNING", logger="handoff.live.answers"):
        assert answers.shared(redis_client, "c-fails", "fleet", make) == b"last"
        assert failed.wait(5)
        wait_until(lambda: "not renewed: Redis: Redis went away" in caplog.text, 5, "the log")
