"""Faults the served simulator injects on demand, for the fault suite (issue 9).

A fault is armed for the next ``count`` API requests that match its ``resource`` and
``verb`` (``*`` for any); each matching request takes one, in the order they were armed,
so the same requests in the same order meet the same faults. Faults never touch the
simulation (no RNG draw, no store write except ``compact``), so a run with faults produces
the same cluster as one without. Kinds:

- ``cut-watch``: after ``after`` lines, half of the next watch line is written inside a
  chunk announced at full length, then the connection is shut down (mid-chunk, mid-JSON);
- ``stall-watch``: after ``after`` lines, silence with the connection open until the
  client goes away, ``seconds`` pass (default: the watch's ``timeoutSeconds``) or the
  server stops; then the connection is dropped without the closing chunk;
- ``expire``: a watch from a resourceVersion gets the ERROR event with a 410 ``Expired``
  Status, a list with a resourceVersion gets HTTP 410 (``0`` and none are not affected);
- ``compact``: when armed, the resource's history is dropped up to the present, so every
  watch from an older resourceVersion gets 410 from then on (an etcd compaction); no count;
- ``throttle``: HTTP 429 ``TooManyRequests`` with ``Retry-After: retry_after``;
- ``error``: HTTP ``code`` (500 by default; 503 or 504) with a Status body.

``at`` (virtual seconds since the run started) keeps a fault dormant until then.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import orjson

KINDS = ("cut-watch", "stall-watch", "expire", "compact", "throttle", "error")
WATCH_ONLY = ("cut-watch", "stall-watch")
VERBS = ("*", "get", "list", "watch", "create", "update", "patch", "delete")
ERROR_CODES = (500, 503, 504)
LOG_LIMIT = 1000


class FaultSpecError(ValueError):
    """A fault specification that cannot be armed; the message says which field and why."""


@dataclass
class Fault:
    fault: str
    resource: str = "*"
    verb: str = "*"
    count: int = 1
    after: int = 0
    seconds: float | None = None
    retry_after: int = 1
    code: int = 500
    at: float | None = None

    def matches(self, verb: str, resource: str, has_version: bool) -> bool:
        if self.resource not in ("*", resource) or self.verb not in ("*", verb):
            return False
        if self.fault in WATCH_ONLY:
            return verb == "watch"
        if self.fault == "expire":
            return verb in ("watch", "list") and has_version
        return True

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


_FIELDS = {f.name: f for f in fields(Fault)}


def parse_fault(spec: Any) -> Fault:
    """One fault from a JSON object; a clear FaultSpecError for anything else."""
    if not isinstance(spec, dict):
        raise FaultSpecError(f"a fault must be an object, not {type(spec).__name__}")
    unknown = sorted(set(spec) - set(_FIELDS))
    if unknown:
        raise FaultSpecError(f"unknown fault field(s): {', '.join(unknown)}")
    kind = spec.get("fault")
    if kind not in KINDS:
        raise FaultSpecError(f"fault must be one of {', '.join(KINDS)}, not {kind!r}")
    values: dict[str, Any] = {"fault": kind}
    for name in ("resource", "verb"):
        if name in spec:
            if not isinstance(spec[name], str) or not spec[name]:
                raise FaultSpecError(f"{name} must be a non-empty string")
            values[name] = spec[name]
    if values.get("verb", "*") not in VERBS:
        raise FaultSpecError(f"verb must be one of {', '.join(VERBS)}")
    for name, low in (("count", 1), ("after", 0), ("retry_after", 0), ("code", 0)):
        if name in spec:
            value = spec[name]
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise FaultSpecError(f"{name} must be an integer >= {low}")
            values[name] = value
    for name in ("seconds", "at"):
        if spec.get(name) is not None:
            value = spec[name]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise FaultSpecError(f"{name} must be a number >= 0")
            values[name] = float(value)
    if values.get("code", 500) not in ERROR_CODES:
        raise FaultSpecError(f"code must be one of {', '.join(map(str, ERROR_CODES))}")
    return Fault(**values)


def parse_faults(data: Any) -> list[Fault]:
    """A fault object, a list of them, or ``{"faults": [...]}``."""
    if isinstance(data, dict) and "faults" in data and "fault" not in data:
        data = data["faults"]
    items = data if isinstance(data, list) else [data]
    return [parse_fault(item) for item in items]


def parse_short(text: str) -> list[Fault]:
    """``cut-watch:resource=pods:count=2,throttle:retry_after=3``: items split by commas,
    the kind first, then ``key=value`` fields split by colons."""
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, *pairs = item.split(":")
        spec: dict[str, Any] = {"fault": kind}
        for pair in pairs:
            key, sep, raw = pair.partition("=")
            if not sep:
                raise FaultSpecError(f"{pair!r} in {item!r} is not key=value")
            try:
                spec[key] = orjson.loads(raw)
            except orjson.JSONDecodeError:
                spec[key] = raw
        out.append(parse_fault(spec))
    if not out:
        raise FaultSpecError("no fault given")
    return out


def load_faults(value: str) -> list[Fault]:
    """``--faults``: a JSON or YAML file, inline JSON, or the short form of ``parse_short``."""
    text = value.strip()
    path = Path(value)
    if not text.startswith(("{", "[")) and path.is_file():
        raw = path.read_text()
        if path.suffix in (".yaml", ".yml"):
            import yaml

            return parse_faults(yaml.safe_load(raw))
        text = raw
    if text.startswith(("{", "[")):
        try:
            return parse_faults(orjson.loads(text))
        except orjson.JSONDecodeError as exc:
            raise FaultSpecError(f"the faults are not valid JSON: {exc}") from exc
    return parse_short(text)


class FaultInjector:
    """Armed faults and what was injected; shared by every request thread."""

    def __init__(
        self,
        elapsed: Callable[[], float] = lambda: 0.0,
        compact: Callable[[str], int] | None = None,
    ) -> None:
        self.elapsed = elapsed
        self.compact = compact
        self.armed: list[Fault] = []
        self.injected: Counter[str] = Counter()
        self.log: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def arm(self, faults: Iterable[Fault]) -> None:
        with self.lock:
            for fault in faults:
                if fault.fault == "compact" and fault.at is None:
                    self._compact(fault)
                else:
                    self.armed.append(fault)

    def clear(self) -> None:
        with self.lock:
            self.armed.clear()

    def take(self, verb: str, resource: str, has_version: bool, path: str) -> Fault | None:
        """The fault this request meets, if any (its count is used up here)."""
        with self.lock:
            now = self.elapsed()
            self._run_due_compactions(now)
            for i, fault in enumerate(self.armed):
                if fault.at is not None and now < fault.at:
                    continue
                if not fault.matches(verb, resource, has_version):
                    continue
                fault.count -= 1
                if fault.count <= 0:
                    del self.armed[i]
                self._note(fault.fault, verb, resource, path, now)
                return fault
        return None

    def _run_due_compactions(self, now: float) -> None:
        due = [f for f in self.armed if f.fault == "compact" and (f.at or 0.0) <= now]
        for fault in due:
            self.armed.remove(fault)
            self._compact(fault)

    def _compact(self, fault: Fault) -> None:
        if self.compact is None:
            raise FaultSpecError("this server cannot compact")
        rv = self.compact(fault.resource)
        self._note("compact", "compact", fault.resource, f"resourceVersion {rv}", self.elapsed())

    def _note(self, kind: str, verb: str, resource: str, path: str, now: float) -> None:
        self.injected[kind] += 1
        self.log.append(
            {"fault": kind, "verb": verb, "resource": resource, "path": path, "virtual_s": now}
        )
        del self.log[:-LOG_LIMIT]

    def state(self) -> dict[str, Any]:
        """What ``GET /_sim/faults`` answers."""
        with self.lock:
            self._run_due_compactions(self.elapsed())
            return {
                "armed": [f.as_dict() for f in self.armed],
                "injected": dict(self.injected),
                "total": sum(self.injected.values()),
                "log": list(self.log),
            }
