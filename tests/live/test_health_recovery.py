"""Health tells the truth both ways (issue 21.1): a real worker watches the served
simulator through a TCP proxy; the proxy is dropped (the API server unreachable) and
restored. While it is down, /healthz, `manage.py status`, the cluster list and the board
all say the stream is failing, and the last three name the cluster, the API server's
host:port and the cause; once it is back, all four say ok again within one retry period
(HANDOFF_WATCH_BACKOFF_CAP) — while the watch requests the recovery opened are still
running (the server ends them only after HANDOFF_WATCH_SERVER_TIMEOUT).
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError

from devtools.devstack import free_port
from handoff.live import clusters, health, leases, store
from handoff.sim import Options, find_scenario
from handoff.sim.runner import serve
from handoff.tasks import start_stream
from tests.conftest import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.faults]

CLUSTER = "flaky"
STREAMS = ("pods", "nodes", "events", "fold")
BACKOFF_CAP = 2  # s: one retry period, the most recovery may take once the API is back
SLACK = 4.0  # s: a list and a request or two on a loaded machine


class Proxy:
    """A TCP proxy on a fixed port that can be dropped (listener and every connection
    closed: new connections are refused) and restored on the same port."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self.listener: socket.socket | None = None
        self.open: list[socket.socket] = []
        self.lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def drop(self) -> None:
        assert self.listener is not None
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.listener = None
        with self.lock:
            for conn in self.open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self.open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[Proxy, Path]]:
    """The `steady` scenario served for an hour of virtual time, behind a proxy, and a
    kubeconfig pointing at the proxy."""
    options = Options(seed=7, duration=3600, start=float(int(time.time())))
    server, _, _ = serve(find_scenario("steady", None), options, "127.0.0.1:0", speed=2)
    proxy = Proxy(int(server.address.rsplit(":", 1)[1]))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{proxy.port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    yield proxy, kubeconfig
    if proxy.listener is not None:
        proxy.drop()
    server.stop()


def _views(client, redis_client) -> dict[str, object]:
    """What each of the four says about the cluster: (failing?, text)."""
    health.write_heartbeat(redis_client, now=time.time())
    healthz = client.get("/healthz")
    out = io.StringIO()
    try:
        call_command("status", stdout=out)
        status_failing = False
    except CommandError:
        status_failing = True
    home = client.get("/").content.decode()
    board = client.get(f"/clusters/{CLUSTER}/").content.decode()
    return {
        "healthz": (healthz.status_code == 503, healthz.content.decode()),
        "status": (status_failing, out.getvalue()),
        "home": ("health-failing" in home, home),
        "board": ("health-failing" in board, board),
    }


def test_health_fails_when_the_api_goes_and_recovers_when_it_comes_back(
    proxied, celery_worker, redis_client, client, settings, monkeypatch
):
    proxy, kubeconfig = proxied
    settings.HANDOFF_DEMO = False
    client.force_login(User.objects.create_user("alice"))
    monkeypatch.setenv("HANDOFF_WATCH_BACKOFF_CAP", str(BACKOFF_CAP))
    celery_worker(queues="default,watch", concurrency=4)
    clusters.register_cluster(
        redis_client,
        clusters.ClusterConfig(name=CLUSTER, kind="kubeconfig", kubeconfig=str(kubeconfig)),
    )
    for stream in STREAMS:
        start_stream(CLUSTER, stream)

    def all_say(failing: bool) -> bool:
        return all(v[0] is failing for v in _views(client, redis_client).values())

    wait_until(lambda: all(leases.holder(redis_client, CLUSTER, s) for s in STREAMS), 30, "holders")
    wait_until(lambda: all_say(False), 30, "a healthy start")

    proxy.drop()
    endpoint = f"127.0.0.1:{proxy.port}"
    line = f"{CLUSTER}/pods ({endpoint}): "

    def pods_named_failing() -> bool:
        # Each stream reaches its third failed call on its own backoff: the first one
        # to fail turns all four views red, the pods line follows a retry or two later.
        views = _views(client, redis_client)
        return all(v[0] for v in views.values()) and all(
            line in views[name][1] for name in ("status", "home", "board")
        )

    wait_until(pods_named_failing, 60, "all four to say the pods stream fails")
    views = _views(client, redis_client)
    for name in ("status", "home", "board"):
        text = views[name][1]
        assert line in text, (name, text)
        assert "connection refused (NewConnectionError)" in text, name
    assert endpoint not in views["healthz"][1]  # /healthz is unauthenticated
    assert f"{CLUSTER}/pods: " in views["healthz"][1]

    proxy.restore()
    back = time.monotonic()
    wait_until(lambda: all_say(False), BACKOFF_CAP + SLACK + 30, "all four to recover")
    took = time.monotonic() - back
    assert took <= BACKOFF_CAP + SLACK, f"health recovered {took:.1f}s after the API did"
    for stream in ("pods", "nodes", "events"):
        assert store.stream_state(redis_client, CLUSTER, stream).get("failures") == "0"
