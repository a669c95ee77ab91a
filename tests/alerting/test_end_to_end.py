"""Paged for real: the simulator's manual-scheduling cluster watched by Handoff's workers,
Daphne serving /metrics, Debian's Prometheus scraping it every second with the shipped
rules (``for:`` and ranges shortened, nothing else changed), Alertmanager, and a webhook.

With HANDOFF_STUCK_AFTER=10 the pod pinned to the missing node ``worker-3`` (ghost3,
created at virtual 40 s) turns stuck at 50 s until PodGC deletes it at about 85 s; three
pods pinned to worker-2 are rejected at 30 to 32 s. The stuck alert must arrive naming the
cluster with a link to the board that lists ghost3, then resolve; the PodGC alert must name
the namespace and resolve once its window has passed. Prometheus jobs without the token
and with a wrong path must see a 401 and a 404. Every dashboard query must run.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from django.urls import resolve

from handoff.live import queries
from tests.conftest import start_daphne, stop, wait_until
from tests.hardening import faultrun

from .stack import Server, Webhook, fast_rules, start_alertmanager, start_prometheus
from .test_dashboard import _concrete, _queries

SPEED = 2  # virtual seconds per second: ghost3 is stuck for about 17 s of wall time
METRICS_TOKEN = "prometheus-scrapes-with-this"
API_TOKEN = "the-test-reads-the-board-with-this"


def _scrape_configs(site: str) -> list[dict]:
    target = {"static_configs": [{"targets": [site.removeprefix("http://")]}]}
    token = {"authorization": {"type": "Bearer", "credentials": METRICS_TOKEN}}
    return [
        {"job_name": "handoff", **target, **token},
        {"job_name": "handoff-without-token", **target},
        {"job_name": "handoff-wrong-path", "metrics_path": "/metric", **target, **token},
    ]


def _targets(prometheus: Server) -> dict[str, dict]:
    active = prometheus.get("/api/v1/targets")["data"]["activeTargets"]
    return {target["labels"]["job"]: target for target in active}


def _scraped(prometheus: Server) -> bool:
    targets = _targets(prometheus)
    return len(targets) == 3 and all(t["health"] != "unknown" for t in targets.values())


def _board_api(link: str) -> dict:
    """What the board behind an alert's link lists: the same filters, through the API."""
    parts = urllib.parse.urlsplit(link)
    match = resolve(parts.path)
    assert match.url_name == "board"
    api = (
        f"{parts.scheme}://{parts.netloc}/api/clusters/{match.kwargs['cluster']}/pods?{parts.query}"
    )
    request = urllib.request.Request(api, headers={"Authorization": f"Bearer {API_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def _control_plane_running(client) -> bool:
    views = [
        v for v in queries.pod_views(client, "sim").values() if v["namespace"] == "kube-system"
    ]
    return len(views) >= 4 and all(v["verdict"] == "running" for v in views)


def _only(alerts: list[dict]) -> dict:
    assert alerts
    labels = {json.dumps(a["labels"], sort_keys=True) for a in alerts}
    assert len(labels) == 1, alerts  # one alert, however often it was notified
    return alerts[0]


@pytest.mark.slow
def test_stuck_and_podgc_deleted_pods_page_through_alertmanager_and_resolve(
    redis_client, tmp_path: Path, monkeypatch
) -> None:
    webhook = Webhook().start()
    started: list = []
    run = None
    try:
        env = {
            "HANDOFF_METRICS_TOKEN": METRICS_TOKEN,
            "HANDOFF_API_TOKEN": API_TOKEN,
            "HANDOFF_DEMO": "0",
            "HANDOFF_RUN_DIR": str(tmp_path),
        }
        daphne, site = start_daphne(env, tmp_path / "daphne.log")
        started.append(daphne)
        alertmanager = start_alertmanager(tmp_path, webhook.url)
        started.append(alertmanager.proc)
        # Prometheus scrapes from the start (the incident counters' zeros included) but
        # gets the rules only once the simulator's clock has run its static pods: it stood
        # paused at virtual 0 while the watches listed, so their timestamps lag the wall
        # clock by that pause and the fold rightly calls them stuck until they start. A
        # real cluster's clock never stands still. ghost3 comes at virtual 40 s.
        rules = tmp_path / "rules.yaml"
        rules.write_text("groups: []\n")
        manager = alertmanager.url.removeprefix("http://")
        prometheus = start_prometheus(tmp_path, _scrape_configs(site), rules, manager)
        started.append(prometheus.proc)
        monkeypatch.setenv("HANDOFF_STUCK_AFTER", "10")
        (tmp_path / "run").mkdir()
        run = faultrun.start(tmp_path / "run", redis_client, None, speed=SPEED, duration=180)
        wait_until(lambda: _control_plane_running(redis_client), 30, "the static pods running")
        # Ranges of 40 s: room for the rules to come late on a loaded machine and still see
        # the rejections (virtual 30 s) in their window.
        fast_rules(site, rules, "40s")
        prometheus.reload()
        assert len(prometheus.get("/api/v1/rules")["data"]["groups"]) == 3

        # A Prometheus that cannot scrape sees why: 401 without the token, 404 off the path.
        wait_until(lambda: _scraped(prometheus), 30, "every job's first scrape")
        targets = _targets(prometheus)
        assert targets["handoff"]["health"] == "up", targets["handoff"]["lastError"]
        assert "401" in targets["handoff-without-token"]["lastError"]
        assert "404" in targets["handoff-wrong-path"]["lastError"]

        wait_until(lambda: webhook.alerts("HandoffPodsStuck", "firing"), 90, "the stuck alert")
        stuck = _only(webhook.alerts("HandoffPodsStuck", "firing"))
        assert stuck["labels"] == {
            "alertname": "HandoffPodsStuck",
            "cluster": "sim",
            "severity": "warning",
        }
        assert stuck["annotations"]["summary"] == "Pods stuck in the node handoff in cluster sim: 1"
        assert stuck["annotations"]["handoff_url"] == f"{site}/clusters/sim/?verdict=stuck"
        board = _board_api(stuck["annotations"]["handoff_url"])
        assert [(p["namespace"], p["name"], p["node"]) for p in board["pods"]] == [
            ("default", "ghost3", "worker-3")
        ]
        runbook = stuck["annotations"]["runbook_url"]
        assert runbook == f"{site}/runbooks/pods-stuck/"
        with urllib.request.urlopen(runbook, timeout=10) as answer:
            assert "HandoffPodsStuck" in answer.read().decode()

        wait_until(lambda: webhook.alerts("HandoffPodGCDeletions", "firing"), 90, "the PodGC alert")
        podgc = _only(webhook.alerts("HandoffPodGCDeletions", "firing"))
        assert podgc["labels"] == {
            "alertname": "HandoffPodGCDeletions",
            "cluster": "sim",
            "namespace": "default",
            "severity": "warning",
        }
        link = podgc["annotations"]["handoff_url"]
        assert link == f"{site}/clusters/sim/?verdict=podgc-deleted&namespace=default"
        deleted = [(p["namespace"], p["name"]) for p in _board_api(link)["pods"]]
        assert deleted == [("default", "ghost3")]

        rejections = webhook.alerts("HandoffKubeletAdmissionRejections", "firing")
        assert {a["labels"].get("node") for a in rejections} == {"worker-2"}, webhook.received

        # The situations end: ghost3 is gone, and no PodGC deletion in the last window.
        wait_until(
            lambda: webhook.alerts("HandoffPodsStuck", "resolved"), 60, "the stuck alert's end"
        )
        wait_until(
            lambda: webhook.alerts("HandoffPodGCDeletions", "resolved"), 90, "the PodGC alert's end"
        )
        assert _only(webhook.alerts("HandoffPodsStuck", "resolved"))["labels"] == stuck["labels"]

        # Every dashboard query runs on this Prometheus; the verdict counts have data.
        for title, expr in _queries():
            answer = prometheus.get("/api/v1/query", query=_concrete(expr))
            assert answer["status"] == "success", (title, answer)
            if title in ("Pods by verdict", "Streams failing"):
                assert answer["data"]["result"], title
    finally:
        if run is not None:
            faultrun.stop_run(run)
        for proc in reversed(started):
            stop(proc)
        webhook.stop()
