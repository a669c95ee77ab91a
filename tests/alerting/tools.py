"""What the alerting tests share: Debian's Prometheus binaries, PromQL read closely enough to
check it against what Handoff exports, and the exported families themselves."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis
import yaml
from prometheus_client.parser import text_string_to_metric_families

from handoff.live import metrics
from handoff.live.health import StreamLimits

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "handoff-rules.yaml"
OPERATOR_RULES = ROOT / "deploy" / "prometheus" / "handoff-prometheusrule.yaml"
RULE_TESTS = Path(__file__).parent / "handoff-rules.test.yaml"
RUNBOOKS = ROOT / "docs" / "runbooks"
PLACEHOLDER = "https://handoff.example.com"


def binary(name: str, package: str) -> str:
    """The path of a Debian Prometheus binary. Missing: a failure under CI (CI=true), where
    `make test` installs it, else a skip naming the package."""
    path = shutil.which(name)
    if path:
        return path
    message = f"{name} not found: install Debian's {package} package (make test does)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(message)
    pytest.skip(message)


def rule_groups(path: Path = RULES) -> list[dict]:
    return yaml.safe_load(path.read_text())["groups"]


def alerts(path: Path = RULES) -> list[dict]:
    return [rule for group in rule_groups(path) for rule in group["rules"] if "alert" in rule]


def recorded(path: Path = RULES) -> set[str]:
    return {
        rule["record"] for group in rule_groups(path) for rule in group["rules"] if "record" in rule
    }


# ---------------------------------------------------------------- PromQL, closely enough

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool"}
KEYWORDS |= {"and", "or", "unless", "offset", "inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_SELECTOR = re.compile(r"(?<![\w:$])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])\s*(\{[^}]*\})?(?!\s*\()")
_MATCHER = re.compile(r'(\w+)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')


@dataclass
class Selector:
    metric: str
    matchers: dict[str, tuple[str, str]] = field(default_factory=dict)  # label -> (op, value)


@dataclass
class Query:
    selectors: list[Selector]
    grouping: set[str]  # labels named in by/without/on/ignoring/group_* clauses


def parse(expr: str) -> Query:
    """The vector selectors and grouping labels of a PromQL expression (no parse tree: the
    shipped expressions are checked by promtool; this only finds the names in them)."""
    grouping: set[str] = set()
    for _, labels in _GROUPING.findall(expr):
        grouping |= {label.strip() for label in labels.split(",") if label.strip()}
    text = _GROUPING.sub(" ", expr)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries: [5m], [$__rate_interval]
    found = []
    for match in _SELECTOR.finditer(_blank_strings_outside_braces(text)):
        name, braces = match.group(1), match.group(2) or ""
        if name in KEYWORDS:
            continue
        matchers = {label: (op, value) for label, op, value in _MATCHER.findall(braces)}
        found.append(Selector(name, matchers))
    return Query(found, grouping)


def _blank_strings_outside_braces(text: str) -> str:
    """Strings outside label matchers (label_replace arguments) hold no metric names."""
    out, depth, last = [], 0, 0
    for match in _STRING.finditer(text):
        depth += text.count("{", last, match.start()) - text.count("}", last, match.start())
        out.append(text[last : match.start()])
        out.append(match.group(0) if depth > 0 else '""')
        last = match.end()
    out.append(text[last:])
    return "".join(out)


# ---------------------------------------------------------------- what Handoff exports


@dataclass
class Exported:
    """Every sample name /metrics renders, with the labels and label values seen."""

    labels: dict[str, set[str]]  # sample name -> label names
    values: dict[tuple[str, str], set[str]]  # (sample name, label) -> values seen

    def has(self, name: str) -> bool:
        return name in self.labels


def exported(client: redis.Redis) -> Exported:
    labels: dict[str, set[str]] = {}
    values: dict[tuple[str, str], set[str]] = {}
    text = metrics.metrics_text(client, StreamLimits())
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
            for label, value in sample.labels.items():
                values.setdefault((sample.name, label), set()).add(value)
    return Exported(labels, values)
