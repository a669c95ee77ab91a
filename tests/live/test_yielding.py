"""The web yields busy cores while a fold is behind (handoff/live/yielding.py), on a real
redis-server: how far behind the folds are, and when the yielder weighs the session down
and lets it back up. serve doing it to its real session: tests/management/test_serve.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from handoff.live import clusters, store, yielding


def folding(client: redis.Redis, name: str, written: list[float], folded: int) -> None:
    """A cluster whose fold runs (its lease held), whose stream holds entries written at
    ``written`` (seconds), the first ``folded`` of them folded."""
    clusters.register_cluster(client, clusters.ClusterConfig(name=name, kind="trace"))
    client.set(store.lease_key(name, clusters.FOLD), "host", ex=30)
    ids = [
        client.xadd(store.events_key(name), {"e": "{}"}, id=f"{int(at * 1000)}-{n}")
        for n, at in enumerate(written)
    ]
    if folded:
        client.hset(store.fold_key(name), "cursor", ids[folded - 1])


def test_a_fold_is_as_far_behind_as_the_oldest_entry_it_has_not_folded(redis_client) -> None:
    now = time.time()
    folding(redis_client, "a", [now - 9, now - 4, now - 2], folded=1)
    folding(redis_client, "b", [now - 3, now - 1], folded=2)  # caught up

    assert yielding.folds_behind(redis_client, now) == pytest.approx(4, abs=0.01)


def test_a_fold_that_has_read_nothing_is_behind_by_its_first_entry(redis_client) -> None:
    now = time.time()
    folding(redis_client, "a", [now - 7, now - 1], folded=0)

    assert yielding.folds_behind(redis_client, now) == pytest.approx(7, abs=0.01)


def test_a_cluster_whose_fold_is_not_running_is_not_waited_for(redis_client) -> None:
    now = time.time()
    folding(redis_client, "stopped", [now - 60], folded=0)
    redis_client.delete(store.lease_key("stopped", clusters.FOLD))

    assert yielding.folds_behind(redis_client, now) == 0.0


@pytest.fixture
def session_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The session's autogroup file, as a plain file the test reads back (writing the
    real one would weigh down the test run's own session)."""
    group = tmp_path / "autogroup"
    group.write_text("/autogroup-1 nice 0\n")
    monkeypatch.setattr(yielding, "AUTOGROUP", group)
    return group


def test_the_web_yields_once_a_fold_is_a_second_behind_until_it_is_caught_up(
    redis_client, session_group: Path
) -> None:
    yielder = yielding.Yielder(redis_client, nice=5)
    now = time.time()
    folding(redis_client, "a", [now - 0.5, now - 0.4], folded=0)

    yielder.check(now)  # half a second: a fold window's ordinary lag
    assert (yielder.yielding, session_group.read_text()) == (False, "/autogroup-1 nice 0\n")
    yielder.check(now + 0.7)  # 1.2 s behind
    assert (yielder.yielding, session_group.read_text()) == (True, "5")
    yielder.check(now + 0.6)  # 1.1 s: still behind
    redis_client.hset(store.fold_key("a"), "cursor", f"{int((now - 0.5) * 1000)}-0")
    yielder.check(now)  # 0.4 s: better, not caught up: the web stays down
    assert yielder.yielding
    redis_client.hset(store.fold_key("a"), "cursor", f"{int((now - 0.4) * 1000)}-1")
    yielder.check(now)
    assert (yielder.yielding, session_group.read_text(), yielder.changes) == (False, "0", 2)


def test_redis_gone_leaves_the_priority_as_it_is(session_group: Path) -> None:
    gone = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    yielder = yielding.Yielder(gone, nice=5)
    yielder.yielding = True

    yielder.check()

    assert yielder.yielding
    assert yielder.changes == 0


@pytest.mark.parametrize(
    ("error", "again"),
    [
        (BlockingIOError(11, "Resource temporarily unavailable"), True),  # the rate limit
        (PermissionError(13, "Permission denied"), False),
        (OSError(30, "Read-only file system"), False),
    ],
)
def test_a_busy_kernel_is_asked_again_and_a_refusal_said_once(
    redis_client, session_group: Path, monkeypatch, caplog, error: OSError, again: bool
) -> None:
    now = time.time()
    folding(redis_client, "a", [now - 3], folded=0)
    refusals = iter([error])

    def write(nice: int, tries: int = 5) -> None:
        refused = next(refusals, None)
        if refused is not None:
            raise refused
        session_group.write_text(str(nice))

    monkeypatch.setattr(yielding, "set_session_nice", write)
    yielder = yielding.Yielder(redis_client, nice=5)
    yielder.check(now)
    assert not yielder.yielding
    yielder.check(now)
    yielder.check(now)

    assert yielder.yielding is again
    assert session_group.read_text() == ("5" if again else "/autogroup-1 nice 0\n")
    refused = [r for r in caplog.records if "cannot yield" in r.getMessage()]
    assert len(refused) == (0 if again else 1)


def test_the_kernel_rate_limit_is_waited_out(session_group: Path, monkeypatch) -> None:
    real = Path.write_text
    calls = []

    def write_text(path: Path, text: str) -> int:
        calls.append(text)
        if len(calls) == 1:
            raise BlockingIOError(11, "Resource temporarily unavailable")
        return real(path, text)

    monkeypatch.setattr(Path, "write_text", write_text)
    yielding.set_session_nice(5)

    assert calls == ["5", "5"]
    assert session_group.read_text() == "5"
