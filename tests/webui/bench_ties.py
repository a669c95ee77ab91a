"""A page after a cursor among pods that share one score, timed (``paging._ranged``).

Creation times are whole seconds, so a verdict index holds runs of equal scores: the
bench's 150,000-pod store has tens of thousands at its first second. This fills one
verdict index of a private redis-server with ``--pods`` pods, ``--tied`` of them at one
second and the rest spread over an hour, then times the next chunk after a cursor drawn
inside the tie, checking each against the index's own order:

    .venv/bin/python -m tests.webui.bench_ties --pods 150000 --tied 47000 --rounds 200
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import redis

from handoff.live import paging, store
from tests.conftest import start_redis, stop

START = 1_767_225_600  # 2026-01-01T00:00:00Z


def fill(client: redis.Redis, key: str, low: float, pods: int, tied: int) -> None:
    rng = random.Random(1)
    scores = {}
    for i in range(pods):
        second = 0 if i < tied else rng.randrange(1, 3600)
        scores[str(uuid.UUID(int=rng.getrandbits(128)))] = low + START + second
    items = list(scores.items())
    for start in range(0, len(items), 5000):
        client.zadd(key, dict(items[start : start + 5000]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=150_000)
    parser.add_argument("--tied", type=int, default=47_000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--size", type=int, default=101, help="a page and one more")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        proc, url = start_redis(Path(work))
        try:
            client = redis.Redis.from_url(url)
            key = store.index_key("bench", "verdict", "deleted")
            low, high = store.verdict_range("deleted")
            fill(client, key, low, args.pods, args.tied)
            order = client.zrange(key, 0, -1, withscores=True)
            rng = random.Random(2)
            times = []
            for _ in range(args.rounds):
                at = rng.randrange(0, args.tied - args.size)
                uid, score = order[at]
                began = time.perf_counter()
                chunk = next(
                    paging._ranged(
                        client, key, low, high, paging.Cursor(score, uid.decode()), args.size
                    )
                )
                times.append((time.perf_counter() - began) * 1000)
                want = [(s, u.decode()) for u, s in order[at + 1 : at + 1 + args.size]]
                assert chunk == want, "a chunk out of the index's order"
            times.sort()
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(
                f"{args.rounds} chunks of {args.size} after a cursor among {args.tied:,} tied "
                f"of {args.pods:,} pods: median {statistics.median(times):.2f} ms, "
                f"p99 {p99:.2f} ms"
            )
        finally:
            stop(proc)


if __name__ == "__main__":
    main()
