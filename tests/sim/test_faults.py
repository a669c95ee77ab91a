"""Fault injection of the served simulator, seen through the official kubernetes client."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.serve.faults import FaultSpecError, load_faults, parse_short
from handoff.sim.serve.server import SimServer

from .helpers import control, nginx, served_from_the_command_line

pytestmark = pytest.mark.faults


@pytest.fixture
def served() -> Iterator[SimServer]:
    """Five running pods on one node, served at 10x."""
    cluster = Cluster(ClusterConfig(seed=3))
    cluster.add_node("n1")
    for i in range(5):
        cluster.create_pod(nginx(f"p{i}", node_name="n1"))
    cluster.loop.run(until=60.0)
    server = SimServer(cluster, speed=10.0)
    server.start()
    yield server
    server.stop()


def _api(server: SimServer, retries: bool | None = None) -> client.CoreV1Api:
    config = client.Configuration(host=server.address)
    if retries is not None:
        config.retries = retries
    return client.CoreV1Api(client.ApiClient(config))


def _faults(server: SimServer, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    return control(server.address, "/_sim/faults", method, body)


def _drain(stream: Iterator[Any], names: list[str]) -> None:
    for event in stream:
        names.append(event["object"].metadata.name)


def test_it_cuts_a_watch_mid_line_and_the_client_sees_a_broken_connection(
    served: SimServer,
) -> None:
    status, _ = _faults(served, "POST", {"fault": "cut-watch", "resource": "pods", "after": 2})
    assert status == 201
    api = _api(served)
    names: list[str] = []
    stream = watch.Watch().stream(
        api.list_pod_for_all_namespaces, timeout_seconds=5, _request_timeout=(5, 5)
    )
    with pytest.raises(ProtocolError, match=r"IncompleteRead|Connection broken"):
        _drain(stream, names)
    assert names == ["p0", "p1"]
    _, state = _faults(served)
    assert state["injected"] == {"cut-watch": 1}
    assert state["armed"] == []
    # Used up: the next watch is whole.
    again = [
        e["object"].metadata.name
        for e in watch.Watch().stream(api.list_pod_for_all_namespaces, timeout_seconds=1)
    ]
    assert again[:5] == ["p0", "p1", "p2", "p3", "p4"]


def test_the_cut_line_is_announced_whole_and_sent_in_half(served: SimServer) -> None:
    import socket

    _faults(served, "POST", {"fault": "cut-watch", "resource": "nodes"})
    host, port = served.httpd.server_address[:2]
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"GET /api/v1/nodes?watch=1 HTTP/1.1\r\nHost: sim\r\n\r\n")
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    body = received.split(b"\r\n\r\n", 1)[1]
    size_line, partial = body.split(b"\r\n", 1)
    assert int(size_line, 16) > len(partial) > 0
    assert partial.startswith(b'{"type":"ADDED"')
    assert not partial.endswith(b"\n")


def test_a_stalled_watch_ends_in_the_clients_read_timeout(served: SimServer) -> None:
    _faults(served, "POST", {"fault": "stall-watch", "resource": "pods", "after": 1})
    api = _api(served)
    seen: list[str] = []
    started = time.monotonic()
    stream = watch.Watch().stream(
        api.list_pod_for_all_namespaces, timeout_seconds=30, _request_timeout=(5, 1.0)
    )
    with pytest.raises(ReadTimeoutError):
        _drain(stream, seen)
    assert seen == ["p0"]
    assert time.monotonic() - started < 10
    assert _faults(served)[1]["injected"] == {"stall-watch": 1}


def test_a_410_storm_makes_the_client_give_up_then_a_relist_recovers(served: SimServer) -> None:
    api = _api(served)
    listed = api.list_pod_for_all_namespaces()
    rv = listed.metadata.resource_version
    # Without timeout_seconds Watch.stream retries a 410 once: two expire faults beat it.
    _faults(served, "POST", {"fault": "expire", "resource": "pods", "count": 2})
    with pytest.raises(ApiException) as err:
        for _ in watch.Watch().stream(
            api.list_pod_for_all_namespaces, resource_version=rv, _request_timeout=(5, 5)
        ):
            pass
    assert err.value.status == 410
    _faults(served, "POST", {"fault": "expire", "verb": "list"})
    with pytest.raises(ApiException) as err:
        api.list_pod_for_all_namespaces(resource_version=rv)
    assert err.value.status == 410
    assert json.loads(err.value.body)["reason"] == "Expired"
    # A list without a resourceVersion is never expired: the relist recovers.
    fresh = api.list_pod_for_all_namespaces().metadata.resource_version
    events = list(
        watch.Watch().stream(
            api.list_pod_for_all_namespaces, resource_version=fresh, timeout_seconds=1
        )
    )
    assert all(e["type"] != "ERROR" for e in events)
    assert _faults(served)[1]["injected"] == {"expire": 3}


def test_compaction_expires_every_older_version(served: SimServer) -> None:
    api = _api(served)
    old = api.list_node().metadata.resource_version
    served.cluster.add_node("n2")  # a change after the old version
    _faults(served, "POST", {"fault": "compact", "resource": "*"})
    for _ in range(2):  # every watch from the old version, not just the next one
        with pytest.raises(ApiException) as err:
            for _ in watch.Watch().stream(api.list_node, resource_version=old, timeout_seconds=1):
                pass
        assert err.value.status == 410
    fresh = api.list_node().metadata.resource_version
    events = list(watch.Watch().stream(api.list_node, resource_version=fresh, timeout_seconds=1))
    assert all(e["type"] != "ERROR" for e in events)


def test_it_throttles_with_429_and_retry_after(served: SimServer) -> None:
    _faults(served, "POST", {"fault": "throttle", "retry_after": 7, "count": 2})
    api = _api(served, retries=False)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            api.list_namespaced_pod("default")
        assert err.value.status == 429
        assert err.value.headers["Retry-After"] == "7"
        body = json.loads(err.value.body)
        assert body["reason"] == "TooManyRequests"
        assert body["details"] == {"retryAfterSeconds": 7}
    assert len(api.list_namespaced_pod("default").items) == 5


def test_the_clients_default_retry_waits_out_one_429(served: SimServer) -> None:
    """urllib3's default Retry (which the client uses) honours Retry-After on a 429 by
    itself, up to three times: a fault suite that wants the caller to see the 429 must
    arm more than that or turn the client's retries off."""
    _faults(served, "POST", {"fault": "throttle", "retry_after": 1})
    started = time.monotonic()
    assert _api(served).list_node().items
    assert time.monotonic() - started >= 0.9
    assert _faults(served)[1]["injected"] == {"throttle": 1}


def test_it_answers_500_to_the_next_n_requests_of_the_chosen_resource(served: SimServer) -> None:
    _faults(served, "POST", {"faults": [{"fault": "error", "resource": "nodes", "count": 2}]})
    api = _api(served)
    assert api.list_namespaced_pod("default").items  # pods are not affected
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            api.list_node()
        assert err.value.status == 500
        assert json.loads(err.value.body)["reason"] == "InternalError"
    assert api.list_node().items
    _faults(served, "POST", {"fault": "error", "code": 503})
    with pytest.raises(ApiException) as err:
        api.read_node("n1")
    assert err.value.status == 503
    assert _faults(served)[1]["injected"] == {"error": 3}


def test_a_fault_with_at_waits_for_that_virtual_time(served: SimServer) -> None:
    _faults(served, "POST", {"fault": "error", "at": 100000})
    api = _api(served)
    assert api.list_node().items
    _, state = _faults(served)
    assert state["armed"][0]["at"] == 100000
    assert state["total"] == 0


def test_the_control_endpoint_rejects_bad_faults_and_disarms(served: SimServer) -> None:
    status, body = _faults(served, "POST", {"fault": "explode"})
    assert status == 400
    assert "fault must be one of" in body["message"]
    status, body = _faults(served, "POST", {"fault": "error", "count": 0})
    assert status == 400
    assert "count must be an integer >= 1" in body["message"]
    status, body = _faults(served, "POST", {"fault": "error", "code": 418})
    assert status == 400
    _faults(served, "POST", {"fault": "throttle", "count": 5})
    status, body = _faults(served, "DELETE")
    assert status == 200
    assert body["armed"] == []
    assert _api(served).list_node().items


def test_it_parses_the_short_form_json_and_files(tmp_path: Path) -> None:
    faults = parse_short("cut-watch:resource=pods:count=2,throttle:retry_after=3")
    assert [(f.fault, f.resource, f.count, f.retry_after) for f in faults] == [
        ("cut-watch", "pods", 2, 1),
        ("throttle", "*", 1, 3),
    ]
    assert load_faults('{"fault": "error", "count": 4}')[0].count == 4
    spec = tmp_path / "faults.yaml"
    spec.write_text("faults:\n- {fault: stall-watch, resource: events, seconds: 2.5}\n")
    assert load_faults(str(spec))[0].seconds == 2.5
    with pytest.raises(FaultSpecError, match="not key=value"):
        parse_short("error:count")


def test_simulate_serve_arms_faults_from_the_command_line(tmp_path: Path) -> None:
    faults = "throttle:retry_after=2,error:resource=nodes"
    with served_from_the_command_line(tmp_path, "--faults", faults) as (_, address):
        config = client.Configuration(host=address)
        config.retries = False
        api = client.CoreV1Api(client.ApiClient(config))
        with pytest.raises(ApiException) as err:
            api.list_node()
        assert err.value.status == 429
        assert err.value.headers["Retry-After"] == "2"
        with pytest.raises(ApiException) as err:
            api.list_node()
        assert err.value.status == 500
        assert api.list_node().items
