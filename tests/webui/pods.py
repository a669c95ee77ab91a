"""Pods for the board's tests: real pod views from a folded trace, varied in bulk and
written through ``store.write_pods`` as the fold worker writes them."""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import redis

from handoff.core import verdicts as v
from handoff.core.trace import format_time
from handoff.core.viewcodec import encode_view
from handoff.live import queries, store
from handoff.live.aggregates import Aggregates
from handoff.live.search import SearchIndex
from tests.live.helpers import fold_all

TRACES = Path(__file__).parent.parent / "data" / "traces"
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
BINDINGS = ("scheduler", "manual", "static", "unknown")


def template(client: redis.Redis) -> dict[str, Any]:
    """One real stored pod view (the fold of a recorded trace) to copy."""
    from handoff.live.sources.playback import replay

    replay(client, "template", TRACES / "stuck-kubelet-silent.jsonl")
    fold_all(client, "template")
    view = next(iter(queries.pod_views(client, "template").values()))
    store.forget_cluster(client, "template")
    return view


def make_views(base: dict[str, Any], count: int, seed: int = 6) -> dict[str, dict[str, Any]]:
    rng = random.Random(seed)
    names = v.VERDICT_NAMES
    views = {}
    for i in range(count):
        view = copy.deepcopy(base)
        uid = f"{rng.getrandbits(128):032x}"
        view.update(
            uid=uid,
            namespace=f"ns-{i % 37}",
            name=f"pod-{i:06d}",
            node=None if i % 11 == 0 else f"node-{i % 53}",
            binding=None if i % 11 == 0 else BINDINGS[i % 7 % 4],
            verdict=names[rng.randrange(len(names))],
        )
        created = START + rng.randrange(86_400)
        view["milestones"] = {**view["milestones"], "created": format_time(created)}
        views[uid] = view
    return views


def write(
    client: redis.Redis,
    cluster: str,
    views: dict[str, dict[str, Any]],
    previous: dict | None = None,
    batch: int = 2000,
) -> dict:
    previous = {} if previous is None else previous
    items = list(views.items())
    kept, names = Aggregates(client, cluster), SearchIndex(client, cluster)
    for start in range(0, len(items), batch):
        pipe = client.pipeline(transaction=False)
        chunk = {uid: (view, encode_view(view)) for uid, view in items[start : start + batch]}
        kept.queue(pipe, chunk, [], previous)
        names.queue(pipe, chunk, [], previous)
        store.write_pods(pipe, cluster, chunk, previous)
        kept.settle(pipe.execute(), len(previous))
    return previous


def stored(views: Any) -> dict[str, tuple[dict[str, Any], bytes]]:
    """Views as the fold hands them to ``store.write_pods``: with their stored form."""
    return {x["uid"]: (x, encode_view(x)) for x in views}


def triage_order(views: list[dict[str, Any]]) -> list[str]:
    """uids worst first, then oldest first (then by uid), computed without the store."""
    return [
        view["uid"]
        for view in sorted(
            views,
            key=lambda x: (-v.severity(x["verdict"]), x["milestones"]["created"], x["uid"]),
        )
    ]


class FoldWriter:
    """Writes one cluster's pods as ``ingest.Folder.flush`` does: an entry in the stream,
    the views and indexes, then the fold's cursor. Each flush moves the cursor a second."""

    def __init__(self, client: redis.Redis, cluster: str, ms: int = int(START * 1000)) -> None:
        self.client = client
        self.cluster = cluster
        self.previous: dict = {}
        self.ms = ms
        self.kept = Aggregates(client, cluster)
        self.names = SearchIndex(client, cluster)

    @property
    def cursor(self) -> str:
        return f"{self.ms}-0"

    def flush(self, views: Any = (), removed: Any = ()) -> str:
        self.ms += 1000
        self.client.xadd(
            store.events_key(self.cluster), {store.STREAM_FIELD: b"{}"}, id=self.cursor
        )
        pipe = self.client.pipeline(transaction=False)
        written = stored(views)
        self.kept.queue(pipe, written, list(removed), self.previous)
        self.names.queue(pipe, written, list(removed), self.previous)
        store.write_pods(pipe, self.cluster, written, self.previous)
        if removed:
            store.drop_pods(pipe, self.cluster, list(removed), self.previous)
        pipe.hset(store.fold_key(self.cluster), "cursor", self.cursor)
        self.kept.settle(pipe.execute(), len(self.previous))
        return self.cursor
