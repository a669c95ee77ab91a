"""The outputs ``manage.py triage`` must keep byte for byte: the cases, how one is run,
and their SHA-256 digests (``tests/data/triage/digests.json``).

The digests were written by the code before the triage speed work (issue 19 item 7) and
are checked by ``test_triage_outputs.py``. A change that means to alter the report
rewrites them on purpose:

    .venv/bin/python tests/offline/triage_outputs.py [CHECKOUT]

(``CHECKOUT``: the repository whose ``manage.py`` produces them; default this one.)
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent.parent
DATA = BASE_DIR / "tests" / "data"
DIGESTS = DATA / "triage" / "digests.json"
# Recorded by the simulator (`simulate --record`): a scale run of 200 pods, the demo's
# first two minutes (almost every verdict) and the handoff-failures scenario.
RECORDED = ("scale-200.jsonl.gz", "demo-120s.jsonl.gz", "handoff-failures.jsonl.gz")
VARIANTS: tuple[tuple[str, ...], ...] = ((), ("--format", "json"))
DEMO_EXTRA: tuple[tuple[str, ...], ...] = (
    ("--verdict", "stuck", "--verdict", "evicted"),
    ("--verdict", "stuck", "--verdict", "evicted", "--format", "json"),
    ("--at", "2026-01-01T00:01:00Z", "--stuck-after", "20"),
    ("--at", "2026-01-01T00:01:00Z", "--stuck-after", "20", "--format", "json"),
)


def scripted() -> list[str]:
    """The scripted traces (tests/data/traces), relative to tests/data."""
    return sorted(f"traces/{path.name}" for path in (DATA / "traces").glob("*.jsonl"))


def cases() -> list[tuple[str, tuple[str, ...]]]:
    """(trace relative to tests/data, extra arguments) for every output kept."""
    found = [(trace, variant) for trace in scripted() for variant in VARIANTS]
    found += [(f"triage/{name}", variant) for name in RECORDED for variant in VARIANTS]
    found += [("triage/demo-120s.jsonl.gz", extra) for extra in DEMO_EXTRA]
    return found


def key(trace: str, args: tuple[str, ...]) -> str:
    return " ".join((trace, *args))


def digest(stdout: bytes, stderr: bytes, status: int) -> str:
    """One case's output: stdout, stderr (the data folder's path left out: messages name
    the file) and the exit status together."""
    text = b"%d\0" % status + stdout + b"\0" + stderr.replace(str(DATA).encode(), b"DATA")
    return hashlib.sha256(text).hexdigest()


def run(checkout: Path, trace: str, args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """``manage.py triage --trace`` in ``checkout``, output to pipes (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    return subprocess.run(
        [sys.executable, "manage.py", "triage", "--trace", str(DATA / trace), *args],
        cwd=checkout,
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )


def outputs(checkout: Path) -> dict[str, str]:
    """Every case's digest, run in ``checkout``, two at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def one(case: tuple[str, tuple[str, ...]]) -> str:
        done = run(checkout, *case)
        return digest(done.stdout, done.stderr, done.returncode)

    every = cases()
    with ThreadPoolExecutor(2) as pool:
        return {key(*case): found for case, found in zip(every, pool.map(one, every), strict=True)}


def write(checkout: Path) -> None:
    found = outputs(checkout)
    DIGESTS.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else BASE_DIR)
