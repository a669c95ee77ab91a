"""The shipped alert rules: valid for promtool, passing their unit tests, the same in the
plain rule file and the PrometheusRule, complete (for, severity, summary, description,
runbook), and written against the metrics Handoff exports, with no series per pod."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from handoff.core.verdicts import VERDICT_NAMES
from handoff.interop.exporters.prometheus import BUCKETS, NAMESPACE_DURATIONS, format_value
from handoff.live import clusters

from .tools import (
    OPERATOR_RULES,
    PLACEHOLDER,
    ROOT,
    RULE_TESTS,
    RULES,
    RUNBOOKS,
    alerts,
    binary,
    parse,
    recorded,
    rule_groups,
)

# Issue 17 adds this verdict; the rule is written against it already (handoff_pods lists
# every verdict, so the series appears when the verdict does).
PENDING_VERDICTS = {"stuck-terminating"}
PROMETHEUS_OWN = {"up"}


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [binary("promtool", "prometheus"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def test_promtool_checks_the_rule_file_and_the_prometheusrule(tmp_path: Path) -> None:
    operator = yaml.safe_load(OPERATOR_RULES.read_text())
    as_file = tmp_path / "from-prometheusrule.yaml"
    as_file.write_text(yaml.safe_dump({"groups": operator["spec"]["groups"]}))

    for path in (RULES, as_file):
        result = _promtool("check", "rules", str(path))
        assert result.returncode == 0, result.stdout + result.stderr
        assert "SUCCESS: 13 rules found" in result.stdout


def test_the_rules_pass_their_promtool_unit_tests() -> None:
    result = _promtool("test", "rules", str(RULE_TESTS))

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_fail_when_a_rule_changes(tmp_path: Path) -> None:
    """The unit tests can fail: with one threshold moved they do."""
    changed = RULES.read_text().replace("for: 5m", "for: 1m", 1)
    assert changed != RULES.read_text()
    (tmp_path / "rules.yaml").write_text(changed)
    tests = RULE_TESTS.read_text().replace(
        "../../deploy/prometheus/handoff-rules.yaml", "rules.yaml"
    )
    (tmp_path / "rules.test.yaml").write_text(tests)

    result = _promtool("test", "rules", str(tmp_path / "rules.test.yaml"))

    assert result.returncode != 0
    assert "HandoffPodsStuck" in result.stdout + result.stderr


def test_the_prometheusrule_holds_the_rule_files_groups() -> None:
    manifest = yaml.safe_load(OPERATOR_RULES.read_text())

    assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"]["groups"] == rule_groups()


def test_every_alert_says_what_where_and_what_to_do() -> None:
    names = [rule["alert"] for rule in alerts()]
    assert len(names) == len(set(names))
    for rule in alerts():
        name, notes = rule["alert"], rule["annotations"]
        assert re.fullmatch(r"\d+[mh]", rule.get("for", "")), name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert {"summary", "description", "runbook_url"} <= set(notes), name
        where = "$labels.cluster" if name != "HandoffDown" else "$labels.instance"
        assert where in notes["summary"], name
        assert where in notes["description"], name
        for label in parse(rule["expr"]).grouping - {"le"}:
            assert f"$labels.{label}" in notes["description"], (name, label)
        runbook = re.fullmatch(rf"{PLACEHOLDER}/runbooks/([a-z-]+)/", notes["runbook_url"])
        assert runbook, name
        page = RUNBOOKS / f"{runbook.group(1)}.md"
        assert page.is_file(), (name, page)
        assert name in page.read_text(), f"{page.name} does not name {name}"


def test_the_expected_situations_have_an_alert() -> None:
    names = {rule["alert"] for rule in alerts()}

    assert {
        "HandoffPodsStuck",
        "HandoffPodsStuckTerminating",
        "HandoffPodGCDeletions",
        "HandoffKubeletAdmissionRejections",
        "HandoffWatchStreamDown",
        "HandoffFoldLagging",
        "HandoffPodStartupSLOBurningFast",
        "HandoffPodStartupSLOBurningSlowly",
    } <= names


def test_the_rules_ask_only_for_what_handoff_exports(exported_metrics) -> None:
    records = recorded()
    buckets = {format_value(bound) for bound in BUCKETS} | {"+Inf"}
    allowed = {
        "verdict": set(VERDICT_NAMES) | PENDING_VERDICTS,
        "duration": set(NAMESPACE_DURATIONS),
        "le": buckets,
        "stream": {*clusters.WATCH_RESOURCES, clusters.FOLD},
    }
    for group in rule_groups():
        for rule in group["rules"]:
            query = parse(rule["expr"])
            assert query.selectors, rule["expr"]
            offered: set[str] = set()
            for selector in query.selectors:
                name = selector.metric
                if name in records or name in PROMETHEUS_OWN:
                    offered |= {"cluster", "job", "instance"}
                    continue
                assert exported_metrics.has(name), f"{name} is not exported by /metrics"
                offered |= exported_metrics.labels[name]
                for label, (op, value) in selector.matchers.items():
                    assert label in exported_metrics.labels[name], (name, label)
                    if op == "=" and label in allowed:
                        assert value in allowed[label], (name, label, value)
            assert query.grouping <= offered, (rule.get("alert") or rule["record"], query.grouping)


def test_the_reader_finds_what_a_query_asks_for(exported_metrics) -> None:
    query = parse(
        'sum by (cluster, namespace) (increase(handoff_pod_incidnets_total{verdict="rejected"}'
        '[15m])) / on (cluster) group_left max(up{job=~"hand.*"}) > 0 unless absent(x_y)'
    )

    assert [(s.metric, s.matchers) for s in query.selectors] == [
        ("handoff_pod_incidnets_total", {"verdict": ("=", "rejected")}),
        ("up", {"job": ("=~", "hand.*")}),
        ("x_y", {}),
    ]
    assert query.grouping == {"cluster", "namespace"}
    assert not exported_metrics.has("handoff_pod_incidnets_total")  # a typo is caught


def test_no_exported_series_is_per_pod(exported_metrics) -> None:
    per_pod = {"pod", "name", "uid", "pod_name", "container"}
    for name, labels in exported_metrics.labels.items():
        assert not labels & per_pod, (name, labels)
    for rule in alerts():
        assert not parse(rule["expr"]).grouping & per_pod, rule["alert"]


def test_the_servicemonitor_scrapes_the_service_with_the_metrics_token() -> None:
    monitor = yaml.safe_load((ROOT / "deploy/prometheus/handoff-servicemonitor.yaml").read_text())
    manifests = list(yaml.safe_load_all((ROOT / "deploy/handoff.yaml").read_text()))
    (service,) = [
        m for m in manifests if m["kind"] == "Service" and m["metadata"]["name"] == "handoff"
    ]
    (endpoint,) = monitor["spec"]["endpoints"]

    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert endpoint["port"] in {port["name"] for port in service["spec"]["ports"]}
    assert endpoint["path"] == "/metrics"
    # The Secret the pod's environment comes from, under the setting's own name.
    assert endpoint["authorization"]["credentials"] == {
        "name": "handoff",
        "key": "HANDOFF_METRICS_TOKEN",
    }
    assert service["metadata"]["name"] == "handoff"  # the job name HandoffDown expects


def test_a_missing_binary_fails_under_ci_and_skips_elsewhere_naming_the_package(
    monkeypatch,
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(
        pytest.fail.Exception, match="install Debian's prometheus-alertmanager package"
    ):
        binary("prometheus-alertmanager", "prometheus-alertmanager")
    monkeypatch.setenv("CI", "")
    with pytest.raises(
        pytest.skip.Exception, match="promtool not found: install Debian's prometheus package"
    ):
        binary("promtool", "prometheus")
