"""Each pod's handoff as an OpenTelemetry trace: OTLP JSON for a file, OTLP/HTTP protobuf
for a collector.

One trace per pod (trace id: the first 16 bytes of SHA-256 of ``cluster/uid``, so a pod
exported twice is the same trace); a root span ``pod <namespace>/<name>`` from creation to
the last stage's end, and a child span per stage (``scheduling``, ``awaiting-kubelet``,
``admission``, ...) with the stage's start and end. The root span carries the verdict; its
status is ERROR for verdicts that need attention, with the explanation as message. The
pod's Kubernetes Events are span events of the root span. Resource attributes:
``service.name=handoff``, ``k8s.cluster.name``. JSON follows the OTLP/JSON encoding:
lowerCamelCase fields, hex trace and span ids, times as strings of nanoseconds.
"""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from typing import Any

from handoff.core import verdicts as v
from handoff.core.trace import parse_time

SCOPE = {"name": "handoff", "version": "1"}
SPAN_KIND_INTERNAL = 1
STATUS_OK, STATUS_ERROR = 1, 2


def trace_id(cluster: str, uid: str) -> bytes:
    return hashlib.sha256(f"{cluster}/{uid}".encode()).digest()[:16]


def span_id(trace: bytes, name: str) -> bytes:
    return hashlib.sha256(trace + name.encode()).digest()[:8]


def _nanos(text: str | None) -> int | None:
    return None if text is None else round(parse_time(text) * 1_000_000_000)


def _attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    if isinstance(value, float):
        return {"key": key, "value": {"doubleValue": value}}
    return {"key": key, "value": {"stringValue": str(value)}}


def pod_spans(cluster: str, view: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The spans of one pod view (OTLP/JSON dicts); empty when it has no stage."""
    stages = [s for s in view.get("stages") or [] if s.get("start") and s.get("end")]
    if not stages:
        return []
    uid = view.get("uid") or f"{view['namespace']}/{view['name']}"
    trace = trace_id(cluster, uid)
    root = span_id(trace, "pod")
    start = min(_nanos(s["start"]) or 0 for s in stages)
    end = max(_nanos(s["end"]) or 0 for s in stages)
    verdict = view.get("verdict") or ""
    attention = verdict in v.VERDICTS and v.VERDICTS[verdict].attention
    attributes = [
        _attribute("k8s.namespace.name", view.get("namespace") or ""),
        _attribute("k8s.pod.name", view.get("name") or ""),
        _attribute("k8s.pod.uid", uid),
        _attribute("handoff.verdict", verdict),
    ]
    for key, field in (
        ("k8s.node.name", "node"),
        ("handoff.reason", "reason"),
        ("handoff.binding", "binding"),
    ):
        if view.get(field):
            attributes.append(_attribute(key, view[field]))
    spans = [
        {
            "traceId": trace.hex(),
            "spanId": root.hex(),
            "name": f"pod {view.get('namespace')}/{view.get('name')}",
            "kind": SPAN_KIND_INTERNAL,
            "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(max(start, end)),
            "attributes": attributes,
            "events": [_event(e) for e in view.get("events") or [] if e.get("first")],
            "status": (
                {"code": STATUS_ERROR, "message": view.get("explanation") or verdict}
                if attention
                else {"code": STATUS_OK}
            ),
        }
    ]
    for stage in stages:
        stage_start, stage_end = _nanos(stage["start"]) or start, _nanos(stage["end"]) or end
        spans.append(
            {
                "traceId": trace.hex(),
                "spanId": span_id(trace, stage["name"]).hex(),
                "parentSpanId": root.hex(),
                "name": stage["name"],
                "kind": SPAN_KIND_INTERNAL,
                "startTimeUnixNano": str(stage_start),
                "endTimeUnixNano": str(max(stage_start, stage_end)),
                "attributes": [
                    _attribute("handoff.stage", stage["name"]),
                    _attribute("handoff.stage.open", bool(stage.get("open"))),
                ],
            }
        )
    return spans


def _event(event: Mapping[str, Any]) -> dict[str, Any]:
    attributes = [
        _attribute("k8s.event.reason", event.get("reason") or ""),
        _attribute("k8s.event.type", event.get("type") or ""),
        _attribute("k8s.event.count", int(event.get("count") or 1)),
        _attribute("k8s.event.message", event.get("message") or ""),
    ]
    if event.get("source"):
        attributes.append(_attribute("k8s.event.source", event["source"]))
    return {
        "timeUnixNano": str(_nanos(event["first"])),
        "name": event.get("reason") or "event",
        "attributes": attributes,
    }


def export_request(cluster: str, views: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """An ExportTraceServiceRequest as OTLP/JSON."""
    spans = [span for view in views for span in pod_spans(cluster, view)]
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [
                        _attribute("service.name", "handoff"),
                        _attribute("k8s.cluster.name", cluster),
                    ]
                },
                "scopeSpans": [{"scope": SCOPE, "spans": spans}],
            }
        ]
    }


def to_protobuf(request: Mapping[str, Any]) -> bytes:
    """The same request as OTLP protobuf bytes (ids converted from hex)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span, Status

    def key_values(items: Iterable[Mapping[str, Any]]) -> list[KeyValue]:
        out = []
        for item in items:
            ((kind, value),) = item["value"].items()
            any_value = AnyValue()
            if kind == "intValue":
                any_value.int_value = int(value)
            elif kind == "boolValue":
                any_value.bool_value = value
            elif kind == "doubleValue":
                any_value.double_value = value
            else:
                any_value.string_value = value
            out.append(KeyValue(key=item["key"], value=any_value))
        return out

    message = ExportTraceServiceRequest()
    for resource_spans in request["resourceSpans"]:
        rs = ResourceSpans()
        rs.resource.attributes.extend(key_values(resource_spans["resource"]["attributes"]))
        for scope_spans in resource_spans["scopeSpans"]:
            ss = rs.scope_spans.add()
            ss.scope.name = scope_spans["scope"]["name"]
            ss.scope.version = scope_spans["scope"]["version"]
            for span in scope_spans["spans"]:
                out = Span(
                    trace_id=bytes.fromhex(span["traceId"]),
                    span_id=bytes.fromhex(span["spanId"]),
                    parent_span_id=bytes.fromhex(span.get("parentSpanId", "")),
                    name=span["name"],
                    kind=span["kind"],
                    start_time_unix_nano=int(span["startTimeUnixNano"]),
                    end_time_unix_nano=int(span["endTimeUnixNano"]),
                )
                out.attributes.extend(key_values(span.get("attributes", [])))
                for event in span.get("events", []):
                    added = out.events.add()
                    added.time_unix_nano = int(event["timeUnixNano"])
                    added.name = event["name"]
                    added.attributes.extend(key_values(event["attributes"]))
                if "status" in span:
                    out.status.CopyFrom(
                        Status(
                            code=span["status"]["code"], message=span["status"].get("message", "")
                        )
                    )
                ss.spans.append(out)
        message.resource_spans.append(rs)
    return message.SerializeToString()


class ExportError(Exception):
    """The collector refused the export or could not be reached."""


def post(
    endpoint: str, body: bytes, timeout: float = 10.0, headers: Mapping[str, str] | None = None
) -> int:
    """POST OTLP/HTTP protobuf to ``endpoint`` (e.g. http://collector:4318/v1/traces)."""
    if not endpoint.startswith(("http://", "https://")):
        raise ExportError("the endpoint must be an http:// or https:// URL")
    request = urllib.request.Request(
        endpoint,
        data=body,
        method="POST",
        headers={"Content-Type": "application/x-protobuf", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        raise ExportError(f"the collector answered HTTP {exc.code}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ExportError(f"cannot reach the collector: {getattr(exc, 'reason', exc)}") from exc
