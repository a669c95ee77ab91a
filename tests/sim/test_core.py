"""The clock and the API server store: ordering, resourceVersions, deletion, binding, 410."""

from __future__ import annotations

import pytest

from handoff.sim.clock import Loop
from handoff.sim.components.apiserver import ApiError, APIServer
from handoff.sim.components.events import CoreRecorder, SeriesRecorder, as_core, as_events
from handoff.sim.objects import stamp

from .helpers import nginx


def test_it_runs_callbacks_in_time_then_fifo_order() -> None:
    loop = Loop(seed=1)
    seen: list[str] = []
    loop.call_later(2.0, seen.append, "late")
    loop.call_later(1.0, seen.append, "first")
    loop.call_later(1.0, seen.append, "second")
    loop.run(until=5.0)
    assert seen == ["first", "second", "late"]
    assert loop.elapsed == 5.0


def test_it_stops_at_the_deadline_without_running_later_work() -> None:
    loop = Loop()
    seen: list[int] = []
    loop.call_later(10.0, seen.append, 1)
    loop.run(until=3.0)
    assert seen == []
    assert loop.elapsed == 3.0
    loop.run(until=11.0)
    assert seen == [1]


def test_it_gives_every_write_a_higher_resource_version() -> None:
    api = APIServer(Loop())
    created = api.create("pods", nginx("a"))
    updated = api.update("pods", created)
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert created["metadata"]["creationTimestamp"] == stamp(api.loop.now)
    assert created["status"] == {"phase": "Pending", "qosClass": "BestEffort"}


def test_it_adds_the_default_300s_tolerations_at_creation() -> None:
    api = APIServer(Loop())
    tolerations = api.create("pods", nginx("a", node_name="n1"))["spec"]["tolerations"]
    assert tolerations == [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]


def test_it_deletes_an_unbound_pod_at_once_and_a_bound_one_gracefully() -> None:
    api = APIServer(Loop())
    seen: list[tuple[str, str]] = []
    api.subscribe("pods", lambda t, o: seen.append((t, o["metadata"]["name"])))
    api.create("pods", nginx("free"))
    api.create("pods", nginx("bound", node_name="n1"))
    api.delete("pods", "default", "free")
    marked = api.delete("pods", "default", "bound")
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
    assert marked["metadata"]["deletionTimestamp"] == stamp(api.loop.now + 30)
    final = api.delete("pods", "default", "bound", grace=0)
    assert final["metadata"]["deletionGracePeriodSeconds"] == 0
    assert seen == [
        ("ADDED", "free"),
        ("ADDED", "bound"),
        ("DELETED", "free"),
        ("MODIFIED", "bound"),
        ("DELETED", "bound"),
    ]


def test_it_keeps_an_object_with_finalizers_until_they_are_removed() -> None:
    api = APIServer(Loop())
    body = nginx("f")
    body["metadata"]["finalizers"] = ["example.com/hold"]
    api.create("pods", body)
    held = api.delete("pods", "default", "f", grace=0)
    assert held["metadata"]["deletionTimestamp"]
    released = dict(held)
    released["metadata"] = {k: v for k, v in held["metadata"].items() if k != "finalizers"}
    api.update("pods", released)
    assert api.find("pods", "default", "f") is None


def test_it_refuses_to_bind_a_pod_twice_with_409() -> None:
    api = APIServer(Loop())
    api.create("pods", nginx("p"))
    bound = api.bind("default", "p", "n1")
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    assert bound["status"]["conditions"][0]["status"] == "True"
    assert "reason" not in bound["status"]["conditions"][0]
    with pytest.raises(ApiError) as err:
        api.bind("default", "p", "n2")
    assert err.value.code == 409
    assert err.value.reason == "Conflict"


def test_work_scheduled_for_the_current_instant_runs_after_what_was_already_due() -> None:
    loop = Loop()
    seen: list[str] = []

    def first() -> None:
        seen.append("first")
        loop.call_later(0.0, seen.append, "added now")

    loop.call_later(1.0, first)
    loop.call_later(1.0, seen.append, "second")
    loop.run(until=2.0)
    assert seen == ["first", "second", "added now"]


def test_a_stop_mid_instant_keeps_the_rest_of_it_for_the_next_run() -> None:
    loop = Loop()
    seen: list[str] = []

    def stopper() -> None:
        seen.append("stop")
        loop.stop()
        loop.call_later(0.0, seen.append, "added now")

    loop.call_later(1.0, stopper)
    loop.call_later(1.0, seen.append, "after")
    loop.run(until=5.0)
    assert seen == ["stop"]
    loop.run(until=5.0)
    assert seen == ["stop", "after", "added now"]
    assert loop.steps == 3


def test_restored_objects_send_no_watch_event_and_older_versions_expire() -> None:
    api = APIServer(Loop())
    seen: list[str] = []
    api.subscribe("pods", lambda type_, obj: seen.append(type_))
    before = api.rv
    body = api.create("pods", nginx("template"))
    api.delete("pods", "default", "template")
    seen.clear()
    restored = api.restore("pods", {**body, "metadata": {**body["metadata"]}})
    assert seen == []
    assert api.find("pods", "default", "template") is restored
    assert int(restored["metadata"]["resourceVersion"]) == api.rv
    with pytest.raises(ApiError):
        api.history_since("pods", before)


def test_it_answers_410_expired_for_a_compacted_resource_version() -> None:
    api = APIServer(Loop(), history=3)
    first = api.create("pods", nginx("a"))
    for name in "bcdef":
        api.create("pods", nginx(name))
    with pytest.raises(ApiError) as err:
        api.history_since("pods", int(first["metadata"]["resourceVersion"]))
    status = err.value.status()
    assert status["code"] == 410
    assert status["reason"] == "Expired"
    assert status["message"].startswith("too old resource version: ")
    assert len(api.history_since("pods", api.rv - 1)) == 1


def test_it_counts_repeated_core_events_on_the_same_object() -> None:
    api = APIServer(Loop())
    pod = api.create("pods", nginx("p"))
    recorder = CoreRecorder(api, "kubelet", "n1")
    seen: list[str] = []
    api.subscribe("events", lambda t, o: seen.append(t))
    recorder.event(pod, "Warning", "BackOff", "Back-off")
    recorder.event(pod, "Warning", "BackOff", "Back-off")
    api.loop.run(until=1.0)
    (event,) = api.list("events")[0]
    assert seen == ["ADDED", "MODIFIED"]
    assert event["count"] == 2
    assert event["source"] == {"component": "kubelet", "host": "n1"}
    assert event["metadata"]["name"].startswith("p.")


def test_it_writes_scheduler_events_through_events_k8s_io_with_series() -> None:
    api = APIServer(Loop())
    pod = api.create("pods", nginx("p"))
    recorder = SeriesRecorder(api, "default-scheduler", "default-scheduler-cp")
    for _ in range(3):
        recorder.event(pod, "Warning", "FailedScheduling", "Scheduling", "0/1 nodes")
        api.loop.run(until=api.loop.elapsed + 1.0)
    (event,) = api.list("events")[0]
    assert event["apiVersion"] == "events.k8s.io/v1"
    assert event["series"]["count"] == 2  # later repeats wait for the 30-minute refresh
    core = as_core(event)
    assert core["source"] == {}
    assert core["reportingComponent"] == "default-scheduler"
    assert core["involvedObject"]["name"] == "p"
    assert core["message"] == "0/1 nodes"
    assert as_events(core)["regarding"] == event["regarding"]
