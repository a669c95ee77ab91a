"""``kubectl handoff`` against a Handoff server (Daphne serving the interop cluster, read
with HANDOFF_API_TOKEN), run through kubectl itself: the board as a table or JSON, one pod's
timeline, verdict, reason and remedy, and every error one line with exit status 1."""

from __future__ import annotations

import gzip
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from devtools.devstack import free_port
from handoff.core import verdicts as v
from handoff.kubectl.errors import PluginError
from handoff.kubectl.remote import HandoffServer
from tests.conftest import start_daphne, stop

from .kubectl import BIN, kubectl, one_line_error

pytestmark = pytest.mark.slow  # Daphne, and a Python start per kubectl call
TOKEN = "kubectl-reads-with-this"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[str]:
    """Daphne on the session's Redis, the API open to TOKEN (the ``prod`` fixture fills
    Redis for each test)."""
    work = tmp_path_factory.mktemp("kubectl-site")
    env = {"HANDOFF_API_TOKEN": TOKEN, "HANDOFF_DEMO": "0", "HANDOFF_RUN_DIR": str(work)}
    proc, url = start_daphne(env, work / "daphne.log")
    yield url
    stop(proc)


@pytest.fixture
def server(site: str, prod, tmp_path: Path) -> dict[str, str]:
    """The environment of an operator whose kubeconfig does not exist (the server needs
    none): namespaces default to "default"."""
    return {"HANDOFF_SERVER": site, "HANDOFF_TOKEN": TOKEN, "KUBECONFIG": str(tmp_path / "none")}


def _identity(views) -> set[tuple]:
    return {(p["namespace"], p["name"], p["uid"], p["verdict"], p["reason"]) for p in views}


def test_kubectl_finds_the_plugin() -> None:
    listed = kubectl("plugin", "list")

    assert listed.returncode == 0, listed.stderr
    assert str(BIN / "kubectl-handoff") in listed.stdout


def test_triage_all_namespaces_lists_every_pod_worst_first(server, prod) -> None:
    result = kubectl("handoff", "triage", "-A", "-o", "json", **server)

    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["cluster"] == "prod"
    assert _identity(body["pods"]) == _identity(prod.values())
    severities = [v.severity(p["verdict"]) for p in body["pods"]]
    assert severities == sorted(severities, reverse=True)


def test_triage_prints_a_namespace_as_kubectl_get_would(server, prod) -> None:
    namespace = next(p["namespace"] for p in prod.values() if p["namespace"] != "default")
    expected = sorted(p["name"] for p in prod.values() if p["namespace"] == namespace)

    table = kubectl("handoff", "triage", "-n", namespace, **server)
    wide = kubectl("handoff", "triage", "-n", namespace, "-o", "wide", **server)
    everywhere = kubectl("handoff", "triage", "-A", **server)

    assert table.returncode == wide.returncode == everywhere.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["NAME", "VERDICT", "REASON", "NODE", "IN", "STAGE", "CREATE→RUN"]
    assert sorted(row.split()[0] for row in rows) == expected
    assert wide.stdout.splitlines()[0].split()[-1] == "UID"
    assert everywhere.stdout.splitlines()[0].startswith("NAMESPACE")
    assert len(everywhere.stdout.splitlines()) == len(prod) + 1


def test_pod_prints_its_timeline_verdict_reason_and_remedy(server, prod) -> None:
    pod = next(p for p in prod.values() if p["verdict"] == "rejected" and p["namespace"] != "odd")

    result = kubectl("handoff", "pod", pod["name"], "-n", pod["namespace"], **server)
    as_json = kubectl("handoff", "pod", pod["name"], "-n", pod["namespace"], "-o", "json", **server)

    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert f"Name:         {pod['name']}\n" in text
    assert f"Verdict:      rejected ({v.VERDICTS['rejected'].summary})\n" in text
    assert f"Reason:       {pod['reason']}\n" in text
    assert (
        " ".join(text.split("Explanation:", 1)[1].split("Timeline:")[0].split())
        == pod["explanation"]
    )
    for stage in pod["stages"]:
        assert f"  {stage['name']} " in text
    for event in pod["events"]:
        assert event["reason"] in text
    assert json.loads(as_json.stdout)["uid"] == pod["uid"]


def test_flags_go_before_or_after_the_command_and_can_come_from_flags(site, prod, tmp_path) -> None:
    namespace = next(p["namespace"] for p in prod.values() if p["namespace"] != "default")
    env = {"KUBECONFIG": str(tmp_path / "none")}
    flags = ["--server", site, "--token", TOKEN]

    before = kubectl("handoff", "-n", namespace, *flags, "-o", "json", "triage", **env)
    after = kubectl("handoff", "triage", *flags, "-o", "json", "--namespace", namespace, **env)

    assert before.returncode == after.returncode == 0, before.stderr + after.stderr
    assert json.loads(before.stdout)["pods"] == json.loads(after.stdout)["pods"]
    assert {p["namespace"] for p in json.loads(before.stdout)["pods"]} == {namespace}


class _NotHandoff(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>a login page</html>")

    def log_message(self, *args: object) -> None:
        pass


class _Packs(http.server.BaseHTTPRequestHandler):
    """Answers gzip-packed JSON whatever the client asked (a broken gzip body under
    /broken/), and notes what each client said it accepts."""

    accepted: list[str] = []

    def do_GET(self) -> None:
        self.accepted.append(self.headers.get("Accept-Encoding", ""))
        body = gzip.compress(json.dumps({"clusters": [{"name": "packed"}]}).encode())
        if self.path.startswith("/broken/"):
            body = body[: len(body) // 2]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def not_handoff() -> Iterator[str]:
    yield from _serve(_NotHandoff)


@pytest.fixture
def packs() -> Iterator[str]:
    _Packs.accepted = []
    yield from _serve(_Packs)


def test_the_plugin_asks_for_gzip_and_unpacks_it(packs) -> None:
    assert HandoffServer(packs, TOKEN).cluster(None, None) == "packed"
    assert _Packs.accepted == ["gzip"]
    with pytest.raises(PluginError, match="sent a broken gzip body"):
        HandoffServer(packs + "/broken", TOKEN).get("/api/clusters")


def test_every_error_is_one_line_and_exit_status_1(server, site, not_handoff, tmp_path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    cases = {
        "wrong token": (["triage", "-A"], {"HANDOFF_TOKEN": "n0t-the-t0ken"}, "401 from"),
        "no token": (["triage"], {"HANDOFF_TOKEN": ""}, "pass --token"),
        "unknown pod": (["pod", "nosuchpod"], {}, "404 from"),
        "unknown cluster": (["triage", "--cluster", "nope"], {}, "(it has: prod)"),
        "nobody there": (["triage"], {"HANDOFF_SERVER": closed}, "cannot reach Handoff"),
        "not a URL": (["triage"], {"HANDOFF_SERVER": "handoff.example.com"}, "http(s) URL"),
        "not Handoff": (["triage"], {"HANDOFF_SERVER": not_handoff}, "did not answer JSON"),
        "two sources": (["triage", "--local"], {}, "drop --server"),
        "no source": (["triage"], {"HANDOFF_SERVER": ""}, "--local"),
        "no command": ([], {}, "say what to show"),
        "unknown command": (["frob"], {}, "invalid choice"),
        "bad output": (["triage", "-o", "yaml"], {}, "invalid choice"),
        "pod with -A": (["pod", "x", "-A"], {}, "use -n"),
        "no kubeconfig for --local": (
            ["triage", "--local", "--kubeconfig", str(tmp_path / "missing")],
            {"HANDOFF_SERVER": ""},
            "kubeconfig",
        ),
    }
    for case, (args, extra, said) in cases.items():
        line = one_line_error(kubectl("handoff", *args, **{**server, **extra}))
        assert said in line, (case, line)
        assert TOKEN not in line, (case, line)  # tokens are never shown
        assert "n0t-the-t0ken" not in line, (case, line)
