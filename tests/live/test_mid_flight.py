"""Durations only from what was seen (issue 21.5): a cluster listed mid-flight.

The simulator's `steady` scenario runs for five minutes before anyone watches; the trace
then starts as a watch connecting at that moment would: an initial list (every object as
it is then, ADDED, observed at the list) followed by the watch's events. Pods already
bound and running at the list must get no figure for what happened before it (not 0 ms:
not observed, counted as such), no open stage before their running one, and the
percentiles — offline, in the live store's summary and on the fleet page — must come
only from the pods whose handoff was watched.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from handoff.core.report import build_report
from handoff.core.trace import format_time, parse_time
from handoff.live import queries
from handoff.live.pages.fleet import fleet_digest
from handoff.live.pages.rows import row_from_view
from handoff.offline.triage import fold_file
from handoff.sim import Options, find_scenario, run
from tests.webui.detail.tracedata import fold_into_redis

START = 1767225600.0
LIST_AT = START + 300.0  # the watch connects five minutes into the run
# Durations that end at a kubelet milestone: for a pod running at the list, all unseen.
AFTER_BINDING = ("bind_to_ack", "ack_to_running", "bind_to_running", "create_to_running")


def mid_flight_trace(tmp: Path) -> Path:
    recording = tmp / "steady.jsonl"
    run(
        find_scenario("steady", None), Options(seed=11, duration=420, start=START), record=recording
    )
    header, *lines = recording.read_bytes().splitlines()
    latest: dict[tuple[str, str], dict] = {}
    after = []
    for raw in lines:
        record = orjson.loads(raw)
        if parse_time(record["observed"]) > LIST_AT:
            after.append(raw)
            continue
        obj = record.get("object") or {}
        key = (obj.get("kind", ""), (obj.get("metadata") or {}).get("uid", ""))
        if record["type"] == "DELETED":
            latest.pop(key, None)
        elif record["type"] in ("ADDED", "MODIFIED"):
            latest[key] = obj
    stamp = format_time(LIST_AT)
    listed = [
        orjson.dumps({"observed": stamp, "type": "ADDED", "object": obj}) for obj in latest.values()
    ]
    trace = tmp / "mid-flight.jsonl"
    trace.write_bytes(b"\n".join([header, *listed, *after]) + b"\n")
    return trace


def _at(view: dict, milestone: str) -> float | None:
    text = view["milestones"][milestone]
    return None if text is None else parse_time(text)


def _check(views: list[dict]) -> tuple[list[dict], list[dict]]:
    mid_flight = [v for v in views if (_at(v, "running") or float("inf")) <= LIST_AT]
    watched = [v for v in views if (_at(v, "created") or 0.0) > LIST_AT]
    assert len(mid_flight) >= 20, "pods already running when the watch began"
    assert watched, "pods created while watched"
    for view in mid_flight:
        durations = view["durations"]
        assert 0.0 not in durations.values(), (view["name"], durations)
        for name in AFTER_BINDING:
            assert durations[name] is None, (view["name"], name, durations)
        # Only the stage it is in (running, or terminated since) may be open.
        opened = [s["name"] for s in view["stages"] if s["open"]]
        assert opened in ([], ["running"], ["terminal"]), (view["name"], view["stages"])
        assert opened in ([], [view["stages"][-1]["name"]]), (view["name"], view["stages"])
    for view in watched:  # seen from creation: measured as before
        if view["verdict"] == "running" and view["binding"] == "scheduler":
            assert view["durations"]["bind_to_ack"] is not None, view["name"]
    return mid_flight, watched


def _headline(summary: dict, mid_flight: list, watched: list) -> None:
    handoff = summary["bind_to_ack"]
    assert handoff["not_observed"] >= len(mid_flight)
    assert 0 < handoff["count"] <= len(watched)
    assert handoff["p50"] > 0.0


def test_offline_a_mid_flight_list_invents_no_figures(tmp_path: Path) -> None:
    timeline, _ = fold_file(mid_flight_trace(tmp_path))
    report = build_report(timeline)
    mid_flight, watched = _check(report["pods"])
    _headline(report["summary"]["durations"], mid_flight, watched)


@pytest.mark.django_db
def test_live_a_mid_flight_list_invents_no_figures(tmp_path: Path, redis_client) -> None:
    fold_into_redis(redis_client, "midflight", mid_flight_trace(tmp_path))
    views = list(queries.pod_views(redis_client, "midflight").values())
    mid_flight, watched = _check(views)
    _headline(queries.durations(redis_client, "midflight")["durations"], mid_flight, watched)
    # The fleet page says how many pods each figure comes from, and how many were unseen.
    fleet = fleet_digest((row_from_view(v) for v in views), None)["durations"]
    _headline(fleet, mid_flight, watched)
