"""deploy/grafana/handoff.json: a dashboard Grafana imports as it is (its Prometheus is a
variable, no data source id of ours inside), whose every query asks for what /metrics
exports and parses (each one checked by promtool as a recording rule)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

from handoff.core.verdicts import VERDICT_NAMES
from handoff.interop.exporters.prometheus import BUCKETS, INCIDENT_VERDICTS, format_value

from .tools import ROOT, binary, parse

DASHBOARD = ROOT / "deploy" / "grafana" / "handoff.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
# What Grafana puts in for its own variables, so promtool can parse the queries.
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "30s",
    "$__range": "6h",
    "$cluster": ".*",
    "$namespace": ".*",
}
PENDING_VERDICTS = {"stuck-terminating"}  # issue 17's verdict (see test_rules.py)


def _dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def _panels() -> list[dict]:
    return [panel for panel in _dashboard()["panels"] if panel["type"] != "row"]


def _queries() -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in _panels() for target in panel["targets"]]


def _concrete(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, expr
    return expr


def test_it_is_an_importable_dashboard_with_its_prometheus_as_a_variable() -> None:
    dashboard = _dashboard()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}

    assert dashboard["title"] == "Handoff"
    assert dashboard["uid"]
    assert isinstance(dashboard["schemaVersion"], int)
    assert "id" not in dashboard  # Grafana assigns one on import
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    for name in ("cluster", "namespace"):
        assert variables[name]["datasource"] == DATASOURCE
    for panel in _panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]
    # No data source of a particular Grafana is baked in anywhere.
    uids = re.findall(r'"uid":\s*"([^"]*)"', DASHBOARD.read_text())
    assert set(uids) <= {"${DS_PROMETHEUS}", "-- Grafana --", dashboard["uid"]}


def test_its_panels_have_unique_ids_and_do_not_overlap() -> None:
    panels = _dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    taken: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        cells = {
            (x, y)
            for x in range(grid["x"], grid["x"] + grid["w"])
            for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not cells & taken, panel["title"]
        taken |= cells


def test_it_shows_what_the_issue_asks_for() -> None:
    exprs = " ".join(expr for _, expr in _queries())
    titles = " ".join(panel["title"] for panel in _panels())

    assert "sum by (verdict) (handoff_pods" in exprs  # verdict counts over time
    assert "histogram_quantile(0.99" in exprs  # duration percentiles...
    slo = [p for p in _panels() if p["title"] == "Create → running percentiles"]
    steps = slo[0]["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert {"color": "red", "value": 5} in steps  # ...against the 5 s SLO
    assert 'verdict="podgc-deleted"' in exprs
    assert 'verdict="rejected"' in exprs
    assert "Per-node heat" in titles
    assert "handoff_stream_failing" in exprs
    assert "handoff_stream_behind_seconds" in exprs


def test_every_query_asks_only_for_what_handoff_exports(exported_metrics) -> None:
    allowed = {
        "verdict": set(VERDICT_NAMES) | PENDING_VERDICTS,
        "le": {format_value(bound) for bound in BUCKETS} | {"+Inf"},
    }
    variables = [v for v in _dashboard()["templating"]["list"] if v["type"] == "query"]
    queries = _queries() + [
        (v["name"], re.fullmatch(r"label_values\((.*), (\w+)\)", v["query"]["query"]).group(1))
        for v in variables
    ]
    for title, expr in queries:
        query = parse(expr)
        offered: set[str] = set()
        for selector in query.selectors:
            assert exported_metrics.has(selector.metric), (title, selector.metric)
            offered |= exported_metrics.labels[selector.metric]
            for label, (op, value) in selector.matchers.items():
                assert label in exported_metrics.labels[selector.metric], (title, label)
                if op == "=" and label in allowed:
                    assert value in allowed[label], (title, label, value)
                if op == "=~" and label == "verdict":
                    assert set(value.split("|")) <= allowed["verdict"], title
        assert query.grouping <= offered, (title, query.grouping)
    incidents = {
        m.group(1) for m in re.finditer(r'incidents_total\{[^}]*verdict="([^"]+)"', str(queries))
    }
    assert incidents <= set(INCIDENT_VERDICTS)
    for variable in variables:
        label = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["query"]["query"]).group(2)
        metric = parse(variable["query"]["query"][len("label_values(") :]).selectors[0].metric
        assert label in exported_metrics.labels[metric], variable["name"]


def test_promtool_parses_every_query(tmp_path: Path) -> None:
    rules = [
        {"record": f"handoff:dashboard_query_{i}", "expr": _concrete(expr)}
        for i, (_, expr) in enumerate(_queries())
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))

    result = subprocess.run(
        [binary("promtool", "prometheus"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def test_promtool_would_catch_a_broken_query(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    broken = _concrete(_queries()[0][1]).replace(")", "", 1)
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "d", "rules": [{"record": "x:y", "expr": broken}]}]})
    )

    result = subprocess.run(
        [binary("promtool", "prometheus"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
