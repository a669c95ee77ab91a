"""/metrics: Prometheus text that prometheus_client parses, with histograms kept up to date
incrementally from the fold's change log."""

from __future__ import annotations

import copy
import time

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from handoff import conf
from handoff.core import viewcodec
from handoff.interop.exporters.prometheus import (
    BUCKETS,
    INCIDENT_VERDICTS,
    NAMESPACE_DURATIONS,
    contribution,
)
from handoff.live import health, metrics, store

pytestmark = pytest.mark.django_db
# What Prometheus 2.x sends when it scrapes.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
    "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)


def _families(text: str) -> dict:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _samples(family, **labels):
    return [s for s in family.samples if all(s.labels.get(k) == v for k, v in labels.items())]


def _expected_counts(views, namespace, duration):
    return sum(
        1
        for view in views.values()
        if view["namespace"] == namespace and view["durations"].get(duration) is not None
    )


def test_it_parses_and_counts_pods_per_verdict(signed_in, prod):
    response = signed_in.get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    families = _families(response.content.decode())

    for sample in families["handoff_pods"].samples:
        expected = sum(1 for v in prod.values() if v["verdict"] == sample.labels["verdict"])
        assert sample.value == expected
    assert sum(s.value for s in families["handoff_pods"].samples) == len(prod)


def test_it_builds_histograms_per_namespace_around_the_slo(signed_in, prod):
    families = _families(signed_in.get("/metrics").content.decode())
    histogram = families["handoff_pod_duration_seconds"]

    assert histogram.type == "histogram"
    for duration in NAMESPACE_DURATIONS:
        count = _samples(histogram, namespace="default", duration=duration)
        counts = [s for s in count if s.name.endswith("_count")]
        expected = _expected_counts(prod, "default", duration)
        if expected:
            assert counts[0].value == expected
            buckets = [s for s in count if s.name.endswith("_bucket")]
            assert [float(s.labels["le"]) for s in buckets] == [*BUCKETS, float("inf")]
            values = [s.value for s in buckets]
            assert values == sorted(values)
            assert values[-1] == expected
    assert "handoff_node_pod_duration_seconds" in families


def test_it_keeps_histograms_right_as_pods_change_and_leave(redis_client, prod):
    metrics.refresh(redis_client, "prod")
    # The fold rewrites some pods later (new cursor) and retention drops others.
    redis_client.hset(store.fold_key("prod"), "cursor", "9999999999999-0")
    changed = {}
    for uid, view in list(prod.items())[:5]:
        view = copy.deepcopy(view)
        view["durations"] = dict.fromkeys(view["durations"], 4.5)
        changed[uid] = (view, viewcodec.encode_view(view))
    gone = list(prod)[5:8]
    pipe = redis_client.pipeline(transaction=False)
    store.write_pods(pipe, "prod", changed, {})
    store.drop_pods(pipe, "prod", gone, {})
    pipe.execute()

    metrics.refresh(redis_client, "prod")
    incremental = metrics.counters(redis_client, "prod")
    redis_client.delete(metrics.mark_key("prod"))
    metrics.refresh(redis_client, "prod")
    rebuilt = metrics.counters(redis_client, "prod")

    # The dropped pods stay counted (counters only grow); a rebuild counts stored pods.
    expected = dict(rebuilt)
    for uid in gone:
        for key, value in contribution(prod[uid]).items():
            expected[key] = expected.get(key, 0.0) + value
    assert {k: round(v, 6) for k, v in incremental.items() if v} == {
        k: round(v, 6) for k, v in expected.items() if v
    }
    assert redis_client.hlen(metrics.contributions_key("prod")) == len(prod) - 3


def test_it_counts_incidents_per_namespace_and_node_once_and_for_good(redis_client, prod):
    metrics.refresh(redis_client, "prod")
    first = _families(metrics.metrics_text(redis_client, conf.stream_limits()))
    incidents = [v for v in prod.values() if v["verdict"] in INCIDENT_VERDICTS]
    assert {v["verdict"] for v in incidents} == set(INCIDENT_VERDICTS)  # the data has each
    for view in incidents:
        labels = {"namespace": view["namespace"], "verdict": view["verdict"]}
        (sample,) = _samples(first["handoff_pod_incidents"], cluster="prod", **labels)
        assert sample.name == "handoff_pod_incidents_total"
        assert sample.value == sum(
            1 for v in incidents if (v["namespace"], v["verdict"]) == tuple(labels.values())
        )
    bound = [v for v in incidents if v["node"]]
    for view in bound:
        labels = {"node": view["node"], "verdict": view["verdict"]}
        (sample,) = _samples(first["handoff_node_pod_incidents"], cluster="prod", **labels)
        assert sample.value == sum(
            1 for v in bound if (v["node"], v["verdict"]) == (view["node"], view["verdict"])
        )

    # Every namespace and node holding pods has a series for every incident, 0 included:
    # increase() takes a series' first sample as its start.
    for label, family in (
        ("namespace", "handoff_pod_incidents"),
        ("node", "handoff_node_pod_incidents"),
    ):
        key = "node" if label == "node" else "namespace"
        holding = {v[key] for v in prod.values() if v[key]}
        for value in holding:
            for verdict in INCIDENT_VERDICTS:
                (sample,) = _samples(
                    first[family], cluster="prod", **{label: value}, verdict=verdict
                )
                expected = sum(1 for v in incidents if (v[key], v["verdict"]) == (value, verdict))
                assert sample.value == expected
    assert any(s.value == 0 for s in first["handoff_pod_incidents"].samples)

    # One incident pod judged again as something else, another forgotten: both stay counted.
    again, forgotten = incidents[0], incidents[1]
    redis_client.hset(store.fold_key("prod"), "cursor", "9999999999999-0")
    pipe = redis_client.pipeline(transaction=False)
    judged = {**again, "verdict": "running"}
    store.write_pods(pipe, "prod", {again["uid"]: (judged, viewcodec.encode_view(judged))}, {})
    store.drop_pods(pipe, "prod", [forgotten["uid"]], {})
    pipe.execute()
    later = _families(metrics.metrics_text(redis_client, conf.stream_limits()))

    def totals(families):  # the counted ones: zeros come and go with the pods
        return {
            (s.name, tuple(sorted(s.labels.items())), s.value)
            for name in ("handoff_pod_incidents", "handoff_node_pod_incidents")
            for s in families[name].samples
            if s.value
        }

    assert totals(later) == totals(first)
    (running,) = _samples(later["handoff_pods"], cluster="prod", verdict="running")
    (before,) = _samples(first["handoff_pods"], cluster="prod", verdict="running")
    assert running.value == before.value + 1


def test_it_reports_stream_lag_and_rates(signed_in, prod, redis_client):
    store.note_stream(redis_client, "prod", "fold", last_event=1.0, events=42, started=0.5)
    families = _families(signed_in.get("/metrics").content.decode())

    (events,) = _samples(families["handoff_stream_events"], cluster="prod", stream="fold")
    assert events.value == 42
    (up,) = _samples(families["handoff_stream_up"], cluster="prod", stream="fold")
    assert up.value == 0  # nobody holds the fold's lease in this test
    assert _samples(families["handoff_stream_lag_seconds"], stream="fold")[0].value > 0


def test_it_says_which_streams_fail_as_healthz_does(signed_in, prod, redis_client):
    def failing() -> tuple[dict[str, float], dict[str, dict]]:
        families = _families(signed_in.get("/metrics").content.decode())
        samples = families["handoff_stream_failing"].samples
        report = health.check_streams(redis_client, time.time(), conf.stream_limits())["prod"]
        return {s.labels["stream"]: s.value for s in samples}, report

    store.note_stream(redis_client, "prod", "fold", failures=5, last_error="HTTP 503")
    broken, report = failing()
    store.note_stream(redis_client, "prod", "fold", failures=0)
    mended, _ = failing()

    assert report["fold"]["ok"] is False
    assert broken == {"fold": 1.0}
    assert mended == {"fold": 0.0}


def test_it_sends_a_browser_to_sign_in_and_refuses_a_scraper_with_401(client, settings, prod):
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_METRICS_TOKEN = ""

    browser = client.get("/metrics", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    scraper = client.get("/metrics", HTTP_ACCEPT=PROMETHEUS_ACCEPT)

    assert browser.status_code == 302
    assert "/accounts/login/" in browser["Location"]
    assert scraper.status_code == 401
    assert scraper.content.decode().count("\n") == 1
    assert "HANDOFF_METRICS_TOKEN" in scraper.content.decode()


def test_it_answers_a_wrong_path_with_404_signed_in_or_not(client, signed_in, settings, prod):
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_METRICS_TOKEN = "s3cret-token"
    bearer = {"HTTP_AUTHORIZATION": "Bearer s3cret-token", "HTTP_ACCEPT": PROMETHEUS_ACCEPT}

    for path in ("/metric", "/metrics/", "/prometheus/metrics"):
        assert client.get(path, **bearer).status_code == 404
        assert signed_in.get(path).status_code == 404


def test_it_takes_only_the_bearer_token_when_one_is_set(signed_in, settings, prod):
    settings.HANDOFF_METRICS_TOKEN = "s3cret-token"
    anonymous = Client()

    assert anonymous.get("/metrics").status_code == 401
    wrong = anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong")
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"] == 'Bearer realm="handoff-metrics"'
    assert "s3cret" not in wrong.content.decode()
    assert signed_in.get("/metrics").status_code == 401  # a session is not the token
    good = anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert good.status_code == 200
    assert "handoff_pods" in good.content.decode()


def test_it_escapes_label_values():
    from handoff.interop.exporters.prometheus import Family, render

    family = Family("x", "gauge", "help\nwith newline")
    family.add(1.0, cluster='a"b\\c\nd')
    (parsed,) = text_string_to_metric_families(render([family]))

    assert parsed.samples[0].labels["cluster"] == 'a"b\\c\nd'


def test_it_rebuilds_a_little_per_scrape_and_says_when_it_is_done(redis_client, prod, monkeypatch):
    monkeypatch.setattr(metrics, "CHUNK", 4)
    monkeypatch.setattr(metrics, "REBUILD_BUDGET", 8)
    scrapes = []
    while True:
        families = _families(metrics.metrics_text(redis_client, conf.stream_limits()))
        (complete,) = families["handoff_metrics_histograms_complete"].samples
        scrapes.append(complete.value)
        if complete.value == 1 or len(scrapes) > 100:
            break
    budgeted = metrics.counters(redis_client, "prod")
    monkeypatch.setattr(metrics, "REBUILD_BUDGET", 10**9)
    redis_client.delete(metrics.mark_key("prod"))
    metrics.refresh(redis_client, "prod")

    assert scrapes[0] == 0
    assert scrapes[-1] == 1
    assert len(scrapes) >= len(prod) // 8
    assert {k: round(v, 6) for k, v in budgeted.items() if v} == {
        k: round(v, 6) for k, v in metrics.counters(redis_client, "prod").items() if v
    }


def test_it_reports_the_watch_pool(signed_in, redis_client):
    """One stream host of capacity 4 holding a cluster's four streams, and a second
    cluster's four waiting: the full pool /healthz names, as gauges."""
    from handoff.live import clusters, hosts, leases

    for name in ("a", "b"):
        config = clusters.ClusterConfig(name=name, kind="kubeconfig", kubeconfig="/k")
        clusters.register_cluster(redis_client, config)
    for stream in ("pods", "nodes", "events", "fold"):
        assert leases.Lease(redis_client, store.lease_key("a", stream), "h", 30).acquire()
    hosts.note_host(redis_client, "h", capacity=4, held=4, until=time.time() + 30)
    families = _families(signed_in.get("/metrics").content.decode())
    assert [s.value for s in families["handoff_watch_pool_workers"].samples] == [1.0]
    streams = {s.labels["state"]: s.value for s in families["handoff_watch_pool_streams"].samples}
    assert streams == {"capacity": 4.0, "held": 4.0, "unheld": 4.0}
    failing = families["handoff_stream_failing"]
    assert [s.value for s in _samples(failing, cluster="b")] == [1.0] * 4
