"""Run the atheris fuzzer of the readers for a bounded number of inputs, seeded with the
scripted traces and the real files (tests/hardening/fuzz_readers.py): a crash fails."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SEEDS = [
    *sorted((ROOT / "tests" / "data" / "traces").glob("*.jsonl")),
    *sorted((ROOT.parent / "shared" / "traces" / "real").glob("*.json")),
]


def test_the_readers_survive_coverage_guided_fuzzing(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for seed in SEEDS:
        data = seed.read_bytes()[:4096]  # small seeds keep each run fast
        (corpus / seed.name).write_bytes(data)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.hardening.fuzz_readers",
            "-runs=10000",
            "-max_len=4096",
            "-rss_limit_mb=2048",
            f"-artifact_prefix={tmp_path}/",
            str(corpus),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "timeout-"))]
    assert not crashes, result.stderr[-3000:]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Done 10000 runs" in result.stderr
    shutil.rmtree(corpus)
