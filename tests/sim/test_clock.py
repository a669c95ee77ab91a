"""The served simulator's clock: started paused, resumed and paused again over HTTP
(``/_sim/clock``), and ``simulate --serve --paused`` from the command line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from handoff.sim.scenarios import Options, manual_scheduling
from handoff.sim.serve.server import SimServer

from .helpers import control, served_from_the_command_line

BASE_DIR = Path(__file__).resolve().parents[2]
SPEED = 10.0


@pytest.fixture
def paused() -> Iterator[SimServer]:
    """manual-scheduling served at 10x, its clock held at 0."""
    server = SimServer(manual_scheduling(Options(seed=1)), speed=SPEED, paused=True)
    server.start()
    yield server
    server.stop()


def _clock(address: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    return control(address, "/_sim/clock", method, body)


def _api(address: str) -> client.CoreV1Api:
    return client.CoreV1Api(client.ApiClient(client.Configuration(host=address)))


def test_a_paused_server_answers_and_holds_virtual_time(paused: SimServer) -> None:
    status, state = _clock(paused.address)
    assert status == 200
    assert state == {"running": False, "elapsed": 0.0, "speed": SPEED, "duration": None}
    api = _api(paused.address)
    nodes = api.list_node().items
    assert {n.metadata.name for n in nodes} >= {"control-plane"}
    pods = api.list_pod_for_all_namespaces()
    assert pods.items  # the scenario's built cluster, at virtual time 0
    time.sleep(0.5)  # 5 virtual seconds, were it running
    assert _clock(paused.address)[1]["elapsed"] == 0.0
    assert paused.cluster.loop.elapsed == 0.0
    again = api.list_pod_for_all_namespaces()
    assert again.metadata.resource_version == pods.metadata.resource_version


def test_resume_runs_the_clock_and_pause_holds_it_again(paused: SimServer) -> None:
    time.sleep(0.3)
    resumed = time.monotonic()  # before the resume: a bound however slow the answer
    status, state = _clock(paused.address, "POST", {"running": True})
    assert status == 200
    assert state["running"] is True
    # No jump for the time spent paused: it starts from 0, paced from the resume.
    assert state["elapsed"] < 1.0
    time.sleep(0.5)
    elapsed = _clock(paused.address)[1]["elapsed"]
    wall = time.monotonic() - resumed
    assert 2.0 <= elapsed <= wall * SPEED + 0.5
    status, state = _clock(paused.address, "POST", {"running": False})
    assert status == 200
    assert state["running"] is False
    held = state["elapsed"]
    assert held >= elapsed
    time.sleep(0.5)
    assert _clock(paused.address)[1]["elapsed"] == held
    # Paused twice is still paused; resumed, it goes on from where it was held.
    assert _clock(paused.address, "POST", {"running": False})[1]["elapsed"] == held
    time.sleep(0.3)
    _, state = _clock(paused.address, "POST", {"running": True})
    assert held <= state["elapsed"] < held + 1.0
    time.sleep(0.3)
    assert _clock(paused.address)[1]["elapsed"] > held + 1.0


def test_the_clock_endpoint_rejects_bad_bodies_and_other_methods(paused: SimServer) -> None:
    for body, field in [
        ({}, "running is required"),
        ({"running": "yes"}, 'running must be true or false, not "yes"'),
        ({"running": 1}, "running must be true or false, not 1"),
        ({"running": None}, "running must be true or false, not null"),
        ({"running": True, "speed": 2}, "unknown clock field(s): speed"),
        ([True], "the body must be a JSON object"),
        (b"running", "the body is not JSON"),
    ]:
        status, answer = _clock(paused.address, "POST", body)
        assert status == 400, body
        assert answer["kind"] == "Status"
        assert answer["reason"] == "BadRequest"
        assert field in answer["message"], (body, answer)
    for method in ("PUT", "DELETE", "PATCH"):
        status, answer = _clock(paused.address, method, {"running": True})
        assert status == 405, method
        assert answer["reason"] == "MethodNotAllowed"
    assert _clock(paused.address)[1]["running"] is False  # none of that started it


def test_a_fault_at_a_virtual_time_stays_dormant_while_paused(paused: SimServer) -> None:
    request = urllib.request.Request(
        f"{paused.address}/_sim/faults",
        data=json.dumps({"fault": "error", "at": 1}).encode(),
        method="POST",
    )
    urllib.request.urlopen(request, timeout=5).close()
    api = _api(paused.address)
    time.sleep(0.3)
    assert api.list_node().items  # virtual time 0: not yet
    _clock(paused.address, "POST", {"running": True})
    time.sleep(0.3)  # 3 virtual seconds
    with pytest.raises(client.ApiException) as err:
        api.list_node()
    assert err.value.status == 500


def test_simulate_serve_paused_from_the_command_line(tmp_path: Path) -> None:
    with served_from_the_command_line(tmp_path, "--speed", "10", "--paused") as (proc, address):
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("kubeconfig: ")
        hint = proc.stdout.readline().strip()
        assert hint == (
            "paused at virtual time 0; start the clock with: "
            f"""curl -d '{{"running": true}}' {address}/_sim/clock"""
        )
        assert _api(address).list_node().items
        time.sleep(0.5)
        assert _clock(address)[1] == {
            "running": False,
            "elapsed": 0.0,
            "speed": 10.0,
            "duration": None,
        }
        # What the hint says to run, as it says it.
        curl = hint.split("with: ", 1)[1]
        body = curl.split("'")[1]
        assert json.loads(body) == {"running": True}
        assert _clock(address, "POST", json.loads(body))[1]["running"] is True
        time.sleep(0.3)
        assert _clock(address)[1]["elapsed"] > 1.0
    assert proc.returncode == 0


def test_simulate_refuses_paused_without_serve() -> None:
    done = subprocess.run(
        [sys.executable, "manage.py", "simulate", "--paused", "--duration", "1"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "--paused needs --serve" in done.stderr


def test_simulate_serve_stops_on_sigint_even_when_started_with_it_ignored(
    tmp_path: Path,
) -> None:
    """A script's background job starts its children with SIGINT ignored; Ctrl-C (or a
    supervisor's SIGINT) must still stop the served simulator cleanly."""
    argv = [sys.executable, "manage.py", "simulate", "--scenario", "manual-scheduling"]
    argv += ["--serve", "127.0.0.1:0", "--kubeconfig", str(tmp_path / "kubeconfig")]
    proc = subprocess.Popen(
        argv,
        cwd=BASE_DIR,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("serving manual-scheduling at ")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
