"""Stored pod views: the compact MessagePack form gives back exactly the view that was
written (the JSON every reader showed before it, byte for byte), older JSON views and
views of other shapes still read, and the drop script reads every form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from handoff.core import viewcodec
from handoff.core.views import pod_view
from handoff.live import paging, queries, store
from handoff.offline.triage import fold_file
from handoff.sim import Options, find_scenario, run

TRACES = Path(__file__).parent.parent / "data" / "traces"
BLIND = {"stream": "pods", "from": "2026-01-01T00:00:00.000000Z", "to": "2026-01-01T00:01:00Z"}


def _views(path: Path) -> list[dict[str, Any]]:
    """Every pod's view at four evaluation times, as the fold worker writes them (with
    ``deleted_blind``, both empty and set), and as report.pod_view gives them (without)."""
    timeline, _ = fold_file(path)
    last = timeline.last_observed or 0.0
    views = []
    for at in (last - 30.0, last, last + 45.0, last + 3600.0):
        for n, pod in enumerate(timeline.pods.values()):
            view = pod_view(timeline, pod, at, 60.0)
            views.append(dict(view))
            view["deleted_blind"] = BLIND if n % 2 else None
            views.append(view)
    return views


def _scripted() -> list[Path]:
    return sorted(TRACES.glob("*.jsonl"))


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulator recording with every kind of handoff failure and manual scheduling."""
    out = tmp_path_factory.mktemp("sim")
    path = out / "handoff-failures.jsonl"
    run(find_scenario("handoff-failures", None), Options(seed=2), record=path)  # type: ignore[arg-type]
    manual = out / "manual-scheduling.jsonl"
    run(find_scenario("manual-scheduling", None), Options(seed=1), record=manual)  # type: ignore[arg-type]
    return out


def _round_trips(views: list[dict[str, Any]]) -> None:
    for view in views:
        before = orjson.dumps(view)  # what every reader showed when views were stored as JSON
        stored = viewcodec.encode_view(view)
        assert stored[:1] != b"{"
        assert orjson.dumps(viewcodec.decode_view(stored)) == before, view["name"]
        assert orjson.dumps(viewcodec.decode_view(before)) == before  # stored by an older version
        # pod_view's output takes the compact form, not the fallback map
        assert isinstance(msgspec.msgpack.decode(stored), list), view["name"]


@pytest.mark.parametrize("trace", _scripted(), ids=lambda p: p.stem)
def test_every_scripted_view_round_trips_exactly(trace: Path) -> None:
    _round_trips(_views(trace))


def test_simulator_views_round_trip_exactly(recording: Path) -> None:
    paths = sorted(recording.glob("*.jsonl"))
    assert len(paths) == 2
    for path in paths:
        views = _views(path)
        assert len(views) > 50
        _round_trips(views)


def test_the_compact_form_is_much_smaller_than_json() -> None:
    views = [v for trace in _scripted() for v in _views(trace) if "deleted_blind" in v]
    json_size = sum(len(orjson.dumps(v)) for v in views)
    stored_size = sum(len(viewcodec.encode_view(v)) for v in views)
    assert stored_size < json_size / 2.5


def test_views_of_other_shapes_are_stored_whole() -> None:
    view = _views(TRACES / "rejected-outofcpu.jsonl")[1]
    odd = [
        {**view, "extra": 1},
        {key: view[key] for key in reversed(view)},
        {**view, "stages": [{**s, "more": True} for s in view["stages"]]},
        {**view, "durations": {**view["durations"], "create_to_bind": 3}},
        {**view, "events": [{"reason": "x"}]},
        {"namespace": "a", "name": "b", "uid": "u", "verdict": "running", "node": None},
    ]
    for other in odd:
        stored = viewcodec.encode_view(other)
        assert orjson.dumps(viewcodec.decode_view(stored)) == orjson.dumps(other)


def test_explanations_that_need_more_than_the_view_are_kept() -> None:
    view = next(v for v in _views(TRACES / "stuck-image-pull.jsonl") if v["verdict"] == "stuck")
    assert " s after binding" in view["explanation"]  # the time since binding: not in the view
    packed = msgspec.msgpack.decode(viewcodec.encode_view(view))
    assert packed[10] == view["explanation"]
    running = next(v for v in _views(TRACES / "scheduled-running.jsonl"))
    assert msgspec.msgpack.decode(viewcodec.encode_view(running))[10] is None  # rebuilt on read


def _write(client, cluster: str, views: list[dict[str, Any]]) -> dict[str, tuple]:
    previous: dict[str, tuple] = {}
    pipe = client.pipeline()
    stored = {v["uid"]: (v, viewcodec.encode_view(v)) for v in views}
    store.write_pods(pipe, cluster, stored, previous)
    pipe.execute()
    return previous


def _unique(views: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One view per pod (the last evaluation time), pods without a uid left out."""
    by_uid = {v["uid"]: v for v in views if v["uid"] and "deleted_blind" in v}
    return list(by_uid.values())


def test_the_store_and_its_readers_give_back_what_was_written(redis_client, recording) -> None:
    views = [v for t in [*_scripted(), *recording.glob("*.jsonl")] for v in _unique(_views(t))]
    _write(redis_client, "c", views)
    expected = {v["uid"]: orjson.dumps(v) for v in views}
    stored = queries.pod_views(redis_client, "c")
    assert {uid: orjson.dumps(v) for uid, v in stored.items()} == expected
    read = paging.views(redis_client, "c", list(expected))
    assert {uid: orjson.dumps(v) for uid, v in read.items()} == expected


def test_drop_reads_every_stored_form(redis_client) -> None:
    views = _unique(_views(TRACES / "scheduled-running.jsonl"))
    views += _unique(_views(TRACES / "rejected-outofcpu.jsonl"))
    views += _unique(_views(TRACES / "node-lost.jsonl"))
    views += _unique(_views(TRACES / "unscheduled.jsonl"))  # no node: the "" node index
    assert len(views) >= 4
    assert any(v["node"] is None for v in views)
    previous = _write(redis_client, "c", views)
    key = store.pods_key("c")
    # One view as an older version stored it (JSON), one as a plain MessagePack map.
    redis_client.hset(key, views[0]["uid"], orjson.dumps(views[0]))
    redis_client.hset(key, views[1]["uid"], msgspec.msgpack.encode(views[1]))
    assert {v["uid"]: v for v in views} == queries.pod_views(redis_client, "c")
    pipe = redis_client.pipeline()
    store.drop_pods(pipe, "c", [v["uid"] for v in views], previous)
    pipe.execute()
    assert redis_client.hlen(key) == 0
    assert redis_client.zcard(store.changed_key("c")) == 0
    assert not list(redis_client.scan_iter(match=store.index_key("c", "*", "*")))
    assert not redis_client.exists(store.node_verdicts_key("c"))  # every count back to none
    assert redis_client.zcard(store.removed_key("c")) == len(views)
