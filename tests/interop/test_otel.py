"""OpenTelemetry export: OTLP JSON that the OTLP proto schema accepts, and OTLP/HTTP
protobuf that a receiver on this machine decodes to the same spans."""

from __future__ import annotations

import io
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from django.core.management import CommandError, call_command
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.interop.exporters import otlp
from handoff.interop.importers import open_events
from tests.interop.conftest import TRACES
from tests.real_data import REAL


def _views(name: str) -> list[dict]:
    return build_report(fold(open_events(TRACES / name)))["pods"]


def test_it_validates_against_the_otlp_schema():
    request = otlp.export_request("prod", _views("rejected-outofcpu.jsonl"))

    parsed = json_format.Parse(json.dumps(request), ExportTraceServiceRequest())

    spans = parsed.resource_spans[0].scope_spans[0].spans
    assert len(spans) == len(request["resourceSpans"][0]["scopeSpans"][0]["spans"]) > 0


def test_it_makes_a_trace_per_pod_with_a_span_per_stage():
    (view,) = [v for v in _views("rejected-outofcpu.jsonl") if v["verdict"] == "rejected"]
    spans = otlp.pod_spans("prod", view)
    root, *stages = spans

    assert {s["traceId"] for s in spans} == {root["traceId"]}
    assert len(root["traceId"]) == 32
    assert len(root["spanId"]) == 16
    assert [s["name"] for s in stages] == [s["name"] for s in view["stages"]]
    assert {s["parentSpanId"] for s in stages} == {root["spanId"]}
    assert root["status"]["code"] == otlp.STATUS_ERROR
    attributes = {a["key"]: a["value"] for a in root["attributes"]}
    assert attributes["handoff.verdict"] == {"stringValue": "rejected"}
    assert attributes["k8s.node.name"] == {"stringValue": view["node"]}
    assert [e["name"] for e in root["events"]] == [e["reason"] for e in view["events"]]
    for span in spans:
        assert int(span["startTimeUnixNano"]) <= int(span["endTimeUnixNano"])
    assert otlp.pod_spans("prod", view) == spans  # the same pod is the same trace


def test_a_stuck_deletion_is_an_error_span_with_its_remedy():
    views = _views("stuck-terminating.jsonl")
    stuck = [v for v in views if v["verdict"] == "stuck-terminating"]
    assert len(stuck) == 3

    for view in stuck:
        root = otlp.pod_spans("prod", view)[0]
        attributes = {a["key"]: a["value"] for a in root["attributes"]}
        assert attributes["handoff.verdict"] == {"stringValue": "stuck-terminating"}
        assert attributes["handoff.reason"] == {"stringValue": view["reason"]}
        assert root["status"] == {"code": otlp.STATUS_ERROR, "message": view["explanation"]}


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.received.append((self.path, self.headers["Content-Type"], body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1/traces", _Collector.received
    server.shutdown()
    server.server_close()


def test_it_posts_otlp_protobuf_to_a_collector(collector, tmp_path):
    url, received = collector
    out = io.StringIO()
    call_command(
        "export-otel",
        "--trace",
        str(TRACES / "podgc-new-style.jsonl"),
        "--endpoint",
        url,
        stdout=out,
    )

    ((path, content_type, body),) = received
    message = ExportTraceServiceRequest.FromString(body)
    spans = message.resource_spans[0].scope_spans[0].spans
    assert path == "/v1/traces"
    assert content_type == "application/x-protobuf"
    assert {len(s.trace_id) for s in spans} == {16}
    assert f"sent {len(spans)} spans" in out.getvalue()
    names = {a.key: a.value.string_value for a in message.resource_spans[0].resource.attributes}
    assert names["service.name"] == "handoff"


def test_it_writes_otlp_json_from_any_importer_input(tmp_path):
    out_file = tmp_path / "spans.json"
    source = REAL / (
        "vmware-tanzu__sonobuoy__pkg_client_results_testdata_results-0.10.tar.gz__"
        "resources_ns_kube-system_Pods.json"
    )
    call_command(
        "export-otel", "--trace", str(source), "--out", str(out_file), stdout=io.StringIO()
    )

    parsed = json_format.Parse(out_file.read_text(), ExportTraceServiceRequest())
    roots = [s for s in parsed.resource_spans[0].scope_spans[0].spans if not s.parent_span_id]
    assert len(roots) == 14


def test_it_says_when_the_collector_is_unreachable():
    with pytest.raises(CommandError, match="cannot reach the collector"):
        call_command(
            "export-otel",
            "--trace",
            str(TRACES / "podgc-new-style.jsonl"),
            "--endpoint",
            "http://127.0.0.1:9/v1/traces",
            stdout=io.StringIO(),
        )


@pytest.mark.django_db
def test_it_exports_a_live_clusters_stored_pods(prod, tmp_path):
    out_file = tmp_path / "live.json"
    call_command("export-otel", "--cluster", "prod", "--out", str(out_file), stdout=io.StringIO())

    parsed = json_format.Parse(out_file.read_text(), ExportTraceServiceRequest())
    spans = parsed.resource_spans[0].scope_spans[0].spans
    roots = [s for s in spans if not s.parent_span_id]
    assert len(roots) == sum(1 for view in prod.values() if view["stages"])
    assert len(spans) == len(roots) + sum(len(view["stages"]) for view in prod.values())
