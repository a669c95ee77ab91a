"""/metrics: Prometheus text that prometheus_client parses, with histograms kept up to date
incrementally from the fold's change log."""

from __future__ import annotations

import copy

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from handoff import conf
from handoff.core import viewcodec
from handoff.interop.exporters.prometheus import BUCKETS, NAMESPACE_DURATIONS
from handoff.live import metrics, store

pytestmark = pytest.mark.django_db


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

    assert {k: round(v, 6) for k, v in incremental.items() if v} == {
        k: round(v, 6) for k, v in rebuilt.items() if v
    }
    assert redis_client.hlen(metrics.contributions_key("prod")) == len(prod) - 3


def test_it_reports_stream_lag_and_rates(signed_in, prod, redis_client):
    store.note_stream(redis_client, "prod", "fold", last_event=1.0, events=42, started=0.5)
    families = _families(signed_in.get("/metrics").content.decode())

    (events,) = _samples(families["handoff_stream_events"], cluster="prod", stream="fold")
    assert events.value == 42
    (up,) = _samples(families["handoff_stream_up"], cluster="prod", stream="fold")
    assert up.value == 0  # nobody holds the fold's lease in this test
    assert _samples(families["handoff_stream_lag_seconds"], stream="fold")[0].value > 0


def test_it_follows_the_sites_sign_in_without_a_token(client, settings, prod):
    settings.HANDOFF_DEMO = False
    settings.HANDOFF_METRICS_TOKEN = ""

    response = client.get("/metrics")

    assert response.status_code == 302
    assert "/accounts/login/" in response["Location"]


def test_it_takes_only_the_bearer_token_when_one_is_set(signed_in, settings, prod):
    settings.HANDOFF_METRICS_TOKEN = "s3cret-token"
    anonymous = Client()

    assert anonymous.get("/metrics").status_code == 401
    assert anonymous.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
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
