"""Shared answers (``live/answers``): built once per SHARED_TTL for every web process."""

import threading
import time

import redis

from handoff.live import answers
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


def test_one_build_serves_every_process_until_the_ttl(redis_client):
    calls, make = counting(b'{"a":1}')
    assert answers.shared(redis_client, "c-one-build", "fleet", make) == b'{"a":1}'
    assert answers.shared(redis_client, "c-one-build", "fleet", make) == b'{"a":1}'
    another_process()
    assert answers.shared(redis_client, "c-one-build", "fleet", make) == b'{"a":1}'
    assert len(calls) == 1


def test_an_old_answer_is_sent_while_the_next_is_built(redis_client):
    bodies = iter([b"first", b"second"])
    calls: list[int] = []

    def make() -> bytes:
        calls.append(1)
        return next(bodies)

    assert answers.shared(redis_client, "c-renew", "fleet", make) == b"first"
    time.sleep(answers.SHARED_TTL + 0.1)
    another_process()
    # Older than SHARED_TTL: sent at once, the next built in a thread.
    assert answers.shared(redis_client, "c-renew", "fleet", make) == b"first"
    wait_until(lambda: len(calls) == 2, 5, "the next answer")
    wait_until(lambda: answers.shared(redis_client, "c-renew", "fleet", make) == b"second", 5, "it")
    assert len(calls) == 2


def test_an_answer_older_than_keep_is_never_sent(redis_client, monkeypatch):
    monkeypatch.setattr(answers, "KEEP", 0.3)
    assert answers.shared(redis_client, "c-keep", "n", lambda: b"old") == b"old"
    time.sleep(0.4)
    assert answers.shared(redis_client, "c-keep", "n", lambda: b"new") == b"new"


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
