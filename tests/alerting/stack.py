"""Debian's Prometheus and Alertmanager on loopback for a test, and a webhook receiver that
records what Alertmanager sends."""

from __future__ import annotations

import http.server
import json
import re
import subprocess
import threading
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devtools.devstack import free_port
from tests.conftest import spawn, wait_until

from .tools import PLACEHOLDER, RULES, binary


@dataclass
class Server:
    proc: subprocess.Popen
    url: str

    def reload(self) -> None:
        """Read the configuration and rule files again (``--web.enable-lifecycle``)."""
        request = urllib.request.Request(f"{self.url}/-/reload", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200

    def get(self, path: str, **query: str) -> Any:
        address = f"{self.url}{path}?{urllib.parse.urlencode(query)}" if query else self.url + path
        with urllib.request.urlopen(address, timeout=10) as answer:
            return json.loads(answer.read())


def fast_rules(site: str, path: Path, window: str = "20s") -> Path:
    """The shipped rules made fast for a test: every ``for:`` 1 s, every range ``window``;
    links to ``site``. Expressions, labels and annotations stay the shipped ones."""
    text = RULES.read_text().replace(PLACEHOLDER, site)
    text = re.sub(r"for: \d+[smh]", "for: 1s", text)
    text = re.sub(r"\[\d+[smh]\]", f"[{window}]", text)
    path.write_text(text)
    return path


def start_prometheus(
    directory: Path, scrape_configs: list[dict], rules: Path, alertmanager: str
) -> Server:
    """Prometheus scraping and evaluating every second, sending alerts to ``alertmanager``
    at once (no resend delay); ``reload()`` rereads ``rules``."""
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": scrape_configs,
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    argv = [binary("prometheus", "prometheus"), f"--config.file={directory / 'prometheus.yml'}"]
    argv += [f"--storage.tsdb.path={directory / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"]
    argv += ["--rules.alert.resend-delay=1s", "--web.enable-lifecycle", "--log.level=info"]
    proc = spawn(argv, directory / "prometheus.log")
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _ready(url), 30, f"Prometheus on {url}")
    return Server(proc, url)


def start_alertmanager(directory: Path, webhook: str) -> Server:
    """Alertmanager sending every group to ``webhook`` within a second, resolutions too; no
    cluster gossip (its default listens on every interface)."""
    port = free_port()
    config = {
        "route": {
            "receiver": "webhook",
            "group_by": ["alertname", "cluster"],
            "group_wait": "1s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [
            {"name": "webhook", "webhook_configs": [{"url": webhook, "send_resolved": True}]}
        ],
    }
    (directory / "alertmanager.yml").write_text(yaml.safe_dump(config))
    argv = [binary("prometheus-alertmanager", "prometheus-alertmanager")]
    argv += [
        f"--config.file={directory / 'alertmanager.yml'}",
        f"--storage.path={directory / 'am'}",
    ]
    argv += [f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="]
    proc = spawn(argv, directory / "alertmanager.log")
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: _ready(url), 30, f"Alertmanager on {url}")
    return Server(proc, url)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/-/ready", timeout=1) as answer:
            return answer.status == 200
    except OSError:
        return False


@dataclass
class Webhook:
    """An HTTP server on loopback keeping every JSON body POSTed to it, in order."""

    received: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def start(self) -> Webhook:
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with hook.lock:
                    hook.received.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def alerts(self, name: str, status: str | None = None) -> list[dict]:
        """Every alert of that name received so far (in the notifications' order)."""
        with self.lock:
            notes = list(self.received)
        return [
            alert
            for note in notes
            for alert in note["alerts"]
            if alert["labels"]["alertname"] == name and status in (None, alert["status"])
        ]
