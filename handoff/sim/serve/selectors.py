"""fieldSelector and labelSelector query strings, parsed and matched like the API server."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from handoff.sim.components.apiserver import ApiError

_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    terms, depth, current = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current))
            current = []
        else:
            current.append(ch)
    terms.append("".join(current))
    return [t.strip() for t in terms if t.strip()]


@dataclass
class FieldSelector:
    terms: list[tuple[tuple[str, ...], bool, str]] = field(default_factory=list)

    @staticmethod
    def parse(text: str) -> FieldSelector:
        terms = []
        for term in _split(text):
            if "!=" in term:
                key, value = term.split("!=", 1)
                terms.append((tuple(key.strip().split(".")), False, value.strip()))
            elif "=" in term:
                key, value = term.replace("==", "=").split("=", 1)
                terms.append((tuple(key.strip().split(".")), True, value.strip()))
            else:
                raise ApiError(400, "BadRequest", f"invalid field selector: {term!r}")
        return FieldSelector(terms)

    def matches(self, obj: dict[str, Any]) -> bool:
        for path, equal, value in self.terms:
            current: Any = obj
            for part in path:
                current = current.get(part) if isinstance(current, dict) else None
            text = "" if current is None else str(current)
            if (text == value) != equal:
                return False
        return True


@dataclass
class LabelSelector:
    terms: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)

    @staticmethod
    def parse(text: str) -> LabelSelector:
        terms: list[tuple[str, str, tuple[str, ...]]] = []
        for term in _split(text):
            found = _SET.match(term)
            if found:
                values = tuple(v.strip() for v in found.group(3).split(",") if v.strip())
                terms.append((found.group(1), found.group(2), values))
            elif "!=" in term:
                key, value = term.split("!=", 1)
                terms.append((key.strip(), "notin", (value.strip(),)))
            elif "=" in term:
                key, value = term.replace("==", "=").split("=", 1)
                terms.append((key.strip(), "in", (value.strip(),)))
            elif term.startswith("!"):
                terms.append((term[1:].strip(), "!", ()))
            else:
                terms.append((term, "exists", ()))
        return LabelSelector(terms)

    def matches(self, labels: dict[str, str]) -> bool:
        for key, op, values in self.terms:
            present = key in labels
            if op == "in" and (not present or labels[key] not in values):
                return False
            if op == "notin" and present and labels[key] in values:
                return False
            if op == "exists" and not present:
                return False
            if op == "!" and present:
                return False
        return True
