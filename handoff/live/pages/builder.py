"""The answer builder: one process beside the web's Daphne processes (``manage.py
serve`` starts it) that rebuilds the fleet and nodes answers viewers asked for, when the
store they come from has changed, so that no web process runs those builds (50-250 ms of
Python each, which in a web process held the GIL from the requests it served).

Each POLL it renews its heartbeat (``answers.BUILDER_KEY``: while it lasts the web
processes build nothing but a missing answer), reads which answers were looked at in the
last ``answers.WANTED`` seconds, and for each one whose store version moved on builds it
under the answer's claim (at most once per ``answers.SHARED_TTL``, whoever builds it, so
several ``serve`` replicas share the work). An answer whose store rests is not rebuilt,
only noted current now and then (``answers.restamp``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

import redis

from handoff.live import answers, store
from handoff.live.pages import stored

log = logging.getLogger(__name__)

POLL = 0.1  # seconds between the builder's looks: what it adds to an answer's age
RETRY = 1.0  # seconds before trying again after a Redis error


class AnswerBuilder:
    def __init__(self, client: redis.Redis, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.clock = clock
        self.name = f"{socket.gethostname()}:{os.getpid()}"

    def step(self) -> int:
        """One look at every wanted answer; how many it built."""
        now = self.clock()
        self._beat()
        wanted = self._wanted(now)
        if not wanted:
            return 0
        pipe = self.client.pipeline(transaction=False)
        for cluster, kind in wanted:
            pipe.getrange(answers.answer_key(cluster, kind), 0, answers._HEADER.size - 1)
            pipe.hmget(store.fold_key(cluster), answers.VERSION)
        looks = pipe.execute()
        built = 0
        for (cluster, kind), raw_header, raw_version in zip(
            wanted, looks[::2], looks[1::2], strict=True
        ):
            if raw_version[0] is None:  # no fold flushed this store: nothing to build from
                continue
            key = answers.answer_key(cluster, kind)
            found = answers.read_header(raw_header)
            version = answers.store_version(raw_version)
            if found is not None and found[1] == version:
                answers.restamp(self.client, key, found[0], version)
            elif answers.claim(self.client, key):
                built += self._build(cluster, kind, key)
        return built

    def _wanted(self, now: float) -> list[tuple[str, str]]:
        """The (cluster, kind) pairs looked at in the last WANTED seconds; the others are
        forgotten."""
        out, old = [], []
        for field, at in self.client.hgetall(answers.WANTED_KEY).items():
            cluster, _, kind = field.decode().partition(store.NAME_SEPARATOR)
            if now - float(at) < answers.WANTED and stored.known(kind):
                out.append((cluster, kind))
            else:
                old.append(field)
        if old:
            self.client.hdel(answers.WANTED_KEY, *old)
        return sorted(out)

    def _build(self, cluster: str, kind: str, key: str) -> int:
        answers.build(self.client, cluster, key, lambda: stored.packed(self.client, cluster, kind))
        self._beat()
        return 1

    def _beat(self) -> None:
        self.client.set(answers.BUILDER_KEY, self.name, px=int(answers.BUILDER_TTL * 1000))

    def run(self, stop: threading.Event) -> None:
        """Step every POLL until ``stop``; then the web processes build again at once."""
        try:
            while not stop.is_set():
                try:
                    self.step()
                except redis.RedisError as exc:
                    log.warning("answer builder: Redis: %s", exc)
                    stop.wait(RETRY)
                    continue
                except Exception:  # the web builds meanwhile; serve keeps serving
                    log.exception("answer builder: a build failed")
                    stop.wait(RETRY)
                    continue
                stop.wait(POLL)
        finally:
            with contextlib.suppress(redis.RedisError):  # else it lapses within BUILDER_TTL
                self.client.delete(answers.BUILDER_KEY)
