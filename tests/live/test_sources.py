"""Every kind of cluster `clusters add` accepts runs end to end in a real worker (the
in-process simulator, a pod's service account), and the watch loop meets the API server's
faults (429 with Retry-After, 5xx, 410 after a blind gap) as it should.
"""

from __future__ import annotations

import contextlib
import io
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command
from kubernetes import client as k8s

from handoff.core.report import build_report
from handoff.live import queries, store
from handoff.live.sources.base import SourceError, WatchSettings
from handoff.live.sources.kube import KubeSource, client_for
from handoff.live.sources.sink import StreamSink
from handoff.live.sources.watching import WatchLoop, watch_step
from handoff.offline.triage import fold_file
from handoff.sim import Options, find_scenario, run
from handoff.sim.serve.server import SimServer
from tests.conftest import wait_until

from .helpers import fold_all

pytestmark = pytest.mark.django_db(transaction=True)
RESOURCES = ("pods", "nodes", "events")
SETTINGS = WatchSettings(server_timeout=1, read_timeout=5, lease_ttl=3, backoff_base=0.2)


def _source(server: SimServer) -> KubeSource:
    return KubeSource(client_for(k8s.Configuration(host=server.address)))


def _verdicts(views) -> dict:
    items = views.values() if isinstance(views, dict) else views
    return {(v["namespace"], v["name"], v["uid"]): (v["verdict"], v["reason"]) for v in items}


def _arm(server: SimServer, **fault) -> None:
    """POST /_sim/faults: the simulator's fault endpoint (docs/simulator.md)."""
    request = urllib.request.Request(
        server.address + "/_sim/faults", data=orjson.dumps(fault), method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 201


# ------------------------------------------------------------- cluster kinds


def test_a_simulator_cluster_runs_in_a_worker_into_the_same_verdicts(
    celery_worker, redis_client, tmp_path
):
    """`clusters add --simulator`: the scenario runs inside a real worker, its watch
    events go through the sink and the fold like any cluster's, and the verdicts are
    those of the same scenario and seed run offline."""
    celery_worker(queues="default,watch", concurrency=3)
    out = io.StringIO()
    call_command(
        "clusters", "add", "insim", "--simulator", "manual-scheduling", "--seed", "5",
        "--speed", "30", "--start", stdout=out,
    )  # fmt: skip
    assert "added insim (simulator · manual-scheduling)" in out.getvalue()

    def finished() -> bool:
        state = store.stream_state(redis_client, "insim", "simulator")
        last = redis_client.xrevrange(store.events_key("insim"), count=1)
        folded = store.fold_state(redis_client, "insim").get("cursor")
        return bool(state.get("finished")) and bool(last) and folded == last[0][0].decode()

    wait_until(finished, 60, "the simulated run to end and be folded")
    views = queries.pod_views(redis_client, "insim")
    offline = tmp_path / "offline.jsonl"
    run(find_scenario("manual-scheduling", None), Options(seed=5), record=offline)
    timeline, _ = fold_file(offline)
    expected = _verdicts(build_report(timeline)["pods"])
    assert len(views) >= 15
    assert _verdicts(views) == expected
    # Its objects are known, so a successor run can bury them as blind deletions.
    assert store.known(redis_client, "insim", "pods")


class TlsProxy:
    """A TLS front for the simulator's plain HTTP, as an API server's certificate would
    be: checks the client trusts the CA it was given, and records what it sends."""

    def __init__(self, backend: tuple[str, int], cert: Path, key: Path) -> None:
        self.backend = backend
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.seen = b""
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            client = self.context.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError):
            raw.close()
            return
        upstream = socket.create_connection(self.backend)
        threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()
        self._pipe(client, upstream, True)

    def _pipe(self, source: socket.socket, target: socket.socket, record: bool) -> None:
        try:
            while chunk := source.recv(65536):
                if record:
                    self.seen += chunk[:4096]
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()


def test_an_in_cluster_cluster_uses_the_service_account(
    served, celery_worker, redis_client, tmp_path, monkeypatch
):
    """`clusters add --in-cluster` in a worker that has KUBERNETES_SERVICE_HOST/PORT and a
    service account (token, CA) mounted: the official client's in-cluster loader."""
    server, _ = served
    account = tmp_path / "serviceaccount"
    account.mkdir()
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=kubernetes", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(account / "ca.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    (account / "token").write_text("sa-token-4711")
    host, port = server.address.removeprefix("http://").rsplit(":", 1)
    proxy = TlsProxy((host, int(port)), account / "ca.crt", tmp_path / "key.pem")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(proxy.port))
    monkeypatch.setenv("HANDOFF_SERVICE_ACCOUNT_DIR", str(account))
    try:
        celery_worker(queues="default,watch", concurrency=5)
        call_command("clusters", "add", "incl", "--in-cluster", "--start", stdout=io.StringIO())

        def folded() -> bool:
            # (ghost3 may be gone before a slow worker's first list: PodGC at ~3 s wall.)
            names = {v["name"] for v in queries.pod_views(redis_client, "incl").values()}
            streams = [store.stream_state(redis_client, "incl", r) for r in RESOURCES]
            return "plain" in names and all(s.get("events") for s in streams)

        wait_until(folded, 90, "the in-cluster watches to be folded")
    finally:
        call_command("clusters", "remove", "incl", "--keep-data", stdout=io.StringIO())
        proxy.close()
    assert b"authorization: bearer sa-token-4711" in proxy.seen.lower()
    stored = b"".join(v for _, v in redis_client.hscan_iter(store.stream_key("incl", "pods")))
    assert b"sa-token" not in stored


def _self_signed(folder: Path, name: str) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own CA, and its key."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", f"/CN={name}", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def _tls_source(proxy: TlsProxy, ca: Path) -> KubeSource:
    configuration = k8s.Configuration(host=f"https://127.0.0.1:{proxy.port}")
    configuration.ssl_ca_cert = str(ca)
    return KubeSource(client_for(configuration))


@pytest.fixture
def tls_front(served, tmp_path):
    """The served simulator behind TLS (its certificate, and another CA that did not sign it)."""
    server, _ = served
    cert, key = _self_signed(tmp_path, "apiserver")
    other, _ = _self_signed(tmp_path, "other-ca")
    host, port = server.address.removeprefix("http://").rsplit(":", 1)
    proxy = TlsProxy((host, int(port)), cert, key)
    yield proxy, cert, other
    proxy.close()


def test_a_certificate_the_ca_did_not_sign_is_one_line_not_a_crash(tls_front):
    """The kubernetes client turns a TLS failure into an ApiException without a body and
    then fails decoding it (AttributeError): the source reads through that."""
    proxy, _, other = tls_front
    with pytest.raises(SourceError) as refused:
        _tls_source(proxy, other).list("pods")
    assert str(refused.value) == (
        "API unreachable: SSLError (certificate verify failed: check the CA)"
    )


def test_a_fixed_configuration_counts_from_the_next_attempt(tls_front, redis_client):
    """A failed call rebuilds the source from the cluster's configuration (a new token, the
    right CA): the loop recovers without waiting for its window to end."""
    proxy, cert, other = tls_front
    sink = StreamSink(redis_client, "tls", "pods")
    fixed = {"ca": other}
    loop = WatchLoop(
        _tls_source(proxy, other), sink, "pods", SETTINGS, lease=None,
        reconnect=lambda: _tls_source(proxy, fixed["ca"]),
    )  # fmt: skip
    loop.step(lambda: True)
    state = store.stream_state(redis_client, "tls", "pods")
    assert state["failures"] == "1"
    assert "certificate verify failed" in state["last_error"]
    fixed["ca"] = cert  # the user fixes the kubeconfig's certificate-authority
    loop.step(lambda: True)  # still the old source: fails, then rebuilds it
    loop.step(lambda: True)
    state = store.stream_state(redis_client, "tls", "pods")
    assert state["failures"] == "0"
    assert state["rv"]


# ------------------------------------------------------------------ faults


def test_it_waits_as_long_as_retry_after_says(served, redis_client):
    """429 from the simulator's fault endpoint: the loop sleeps Retry-After, then lists."""
    server, _ = served
    _arm(server, fault="throttle", verb="list", resource="pods", retry_after=2)
    sink = StreamSink(redis_client, "sim", "pods")
    loop = WatchLoop(_source(server), sink, "pods", SETTINGS, lease=None)
    started = time.monotonic()
    loop.step(lambda: True)
    waited = time.monotonic() - started
    state = store.stream_state(redis_client, "sim", "pods")
    assert 2.0 <= waited < 3.5
    assert state["last_error"].startswith("HTTP 429")
    assert state["failures"] == "1"
    assert "rv" not in state
    loop.step(lambda: True)
    state = store.stream_state(redis_client, "sim", "pods")
    assert state["rv"]
    assert state["failures"] == "0"


def test_it_backs_off_exponentially_with_jitter_on_server_errors(served, redis_client):
    server, _ = served
    _arm(server, fault="error", verb="list", resource="nodes", code=503, count=4)
    sink = StreamSink(redis_client, "sim", "nodes")
    loop = WatchLoop(_source(server), sink, "nodes", SETTINGS, lease=None)
    for attempt in range(4):
        ceiling = SETTINGS.backoff_base * 2**attempt
        started = time.monotonic()
        loop.step(lambda: True)
        waited = time.monotonic() - started
        assert ceiling / 2 <= waited < ceiling + 0.5, (attempt, waited)
    assert store.stream_state(redis_client, "sim", "nodes")["failures"] == "4"
    loop.step(lambda: True)
    assert store.stream_state(redis_client, "sim", "nodes")["failures"] == "0"
    # Full jitter: the same attempt does not always wait the same.
    assert len({SETTINGS.backoff(5) for _ in range(20)}) > 1
    assert all(1.6 <= SETTINGS.backoff(4) <= 3.2 for _ in range(100))


def test_nodes_and_events_gone_while_blind_are_recorded_deleted(served, redis_client):
    """A 410 on every stream after a blind gap in which a Node and an Event were deleted:
    both come back as DELETED lines flagged with the gap, the fold marks the node gone,
    and the gap of each stream is recorded for the pages."""
    server, _ = served
    source = _source(server)
    sinks = {r: StreamSink(redis_client, "sim", r) for r in ("pods", "nodes", "events")}
    for resource, sink in sinks.items():
        assert watch_step(source, sink, resource, SETTINGS, lambda: True) == "listed"
        watch_step(source, sink, resource, SETTINGS, lambda: True)
    with server.lock:
        node = next(iter(server.api.stores["nodes"].objects))
        event = next(iter(server.api.stores["events"].objects))
        node_uid = server.api.stores["nodes"].objects[node]["metadata"]["uid"]
        event_uid = server.api.stores["events"].objects[event]["metadata"]["uid"]
        server.api.delete("nodes", *node)
        server.api.delete("events", *event)
    server.compact("*")
    for resource, sink in sinks.items():
        assert watch_step(source, sink, resource, SETTINGS, lambda: True) == "gone"
        assert watch_step(source, sink, resource, SETTINGS, lambda: True) == "listed"

    lines = [line for _, line in store.read_stream(redis_client, "sim")]
    blind_deletions = {
        record["object"]["metadata"]["uid"]: record["blind"]["stream"]
        for record in map(orjson.loads, lines)
        if record.get("type") == "DELETED" and "blind" in record
    }
    # (The simulation runs on meanwhile: a pod may have gone in the gap too.)
    assert blind_deletions[node_uid] == "nodes"
    assert blind_deletions[event_uid] == "events"
    gaps = [
        orjson.loads(raw)["stream"] for raw in redis_client.lrange(store.blind_key("sim"), 0, -1)
    ]
    assert sorted(gaps) == ["events", "nodes", "pods"]
    folder = fold_all(redis_client, "sim")
    assert folder.timeline.nodes[node[1]].deleted is not None
    nodes = orjson.loads(store.fold_state(redis_client, "sim")["nodes_json"])
    assert nodes[node[1]]["deleted_blind"]["stream"] == "nodes"
    assert all(v["deleted_blind"] is None for k, v in nodes.items() if k != node[1])
    assert node_uid not in store.known(redis_client, "sim", "nodes")
