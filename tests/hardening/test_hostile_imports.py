"""Hostile and broken input to every importer (kubectl Lists, `kubectl get -w` streams,
audit logs, YAML): mutated, truncated, gzip-cut copies of real files never crash or hang
the importer, the fold or the report; errors carry line numbers inside the input."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.interop.importers import open_events

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "real"
SAMPLES = {
    "list": (
        REAL / "vmware-tanzu__sonobuoy__pkg_client_results_testdata_results-0.10.tar.gz__"
        "resources_ns_kube-system_Pods.json"
    ).read_bytes()[:20000],
    "events": (
        REAL / "vmware-tanzu__sonobuoy__pkg_client_results_testdata_results-0.10.tar.gz__"
        "resources_ns_default_Events.json"
    ).read_bytes(),
    "watch": (REAL / "ManageIQ__kubeclient__test_json_watch_stream.json").read_bytes(),
    "audit": b"\n".join(
        (REAL / "liggitt__audit2rbac__testdata_demo.log").read_bytes().splitlines()[:40]
    ),
    "yaml": b"apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n"
    b"  metadata: {name: a, namespace: n}\n  spec: {nodeName: x}\n  status: {phase: Running}\n",
}


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    data = bytearray(SAMPLES[draw(st.sampled_from(sorted(SAMPLES)))])
    for _ in range(draw(st.integers(0, 6))):
        action = draw(st.sampled_from(["cut", "flip", "insert", "delete", "nest"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if action == "cut":
            del data[at:]
        elif action == "flip" and data:
            data[at] = draw(st.integers(0, 255))
        elif action == "insert":
            data[at:at] = draw(st.binary(max_size=20))
        elif action == "delete":
            del data[at : at + draw(st.integers(1, 50))]
        else:
            data[at:at] = b"[" * 3000
    return bytes(data)


def _import(data: bytes, plain: bytes | None = None) -> None:
    reader = open_events(io.BytesIO(data))
    events = list(reader)
    report = build_report(fold(events), errors=reader.errors)
    lines = (data if plain is None else plain).count(b"\n") + 1
    for error in reader.errors:
        assert 1 <= error.line <= lines + 1, (error, lines)
        assert error.message
    assert report["summary"]["pods"] == len(report["pods"])


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_damaged_inputs_never_crash_an_importer(data: bytes) -> None:
    _import(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged(), st.floats(0.1, 0.95))
def test_cut_gzip_keeps_what_was_read(data: bytes, keep: float) -> None:
    packed = gzip.compress(data)
    _import(packed[: max(10, int(len(packed) * keep))], plain=data)


def test_a_ten_megabyte_value_and_invalid_utf8_are_reported_not_fatal() -> None:
    big = b'{"kind":"List","items":[{"kind":"Pod","metadata":{"name":"' + b"a" * 10_000_000
    big += b'","namespace":"n"}}]}'
    _import(big)
    reader = open_events(io.BytesIO(SAMPLES["watch"].replace(b'"name"', b'"n\xff\xfeame"', 1)))
    list(reader)
