"""`triage --trace` reads whatever the importers read: the format comes from the content."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import orjson
import pytest
from django.core.management import call_command

REAL = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "real"
PODS = REAL / (
    "vmware-tanzu__sonobuoy__pkg_client_results_testdata_results-0.10.tar.gz__resources_ns_"
    "kube-system_Pods.json"
)
AUDIT = REAL / "liggitt__audit2rbac__testdata_demo.log"


def _triage(path: Path) -> dict:
    out = io.StringIO()
    call_command(
        "triage", "--trace", str(path), "--format", "json", stdout=out, stderr=io.StringIO()
    )
    return orjson.loads(out.getvalue())


@pytest.mark.parametrize("gzipped", [False, True])
def test_it_triages_a_kubectl_list_of_pods(tmp_path: Path, gzipped: bool) -> None:
    path = PODS
    if gzipped:
        path = tmp_path / "pods.whatever"
        path.write_bytes(gzip.compress(PODS.read_bytes()))
    report = _triage(path)
    names = {pod["name"] for pod in report["pods"]}
    assert any(name.startswith("kube-apiserver") for name in names)
    assert all(pod["namespace"] == "kube-system" for pod in report["pods"])
    assert {pod["verdict"] for pod in report["pods"]} <= {"running", "succeeded", "starting"}


def test_it_reads_an_audit_log_without_pods_and_says_what_it_skipped() -> None:
    # audit2rbac's demo log holds no pod, node or event writes: nothing to judge. Like
    # any input with nothing usable in it, exit 2 (docs/cli.md), saying what it held.
    err = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("triage", "--trace", str(AUDIT), stdout=io.StringIO(), stderr=err)
    assert exit_.value.code == 2
    (line,) = err.getvalue().strip().splitlines()
    assert "nothing usable" in line
    assert "audit other resource" in line
