"""Bad input, every command (issue 21.6): each management command, run as an operator
runs it (`python manage.py ...`), given empty, non-trace, missing or unwritable files and
out-of-range options, ends with its documented non-zero exit status and a one-line reason
— never a traceback, never a silent success (docs/cli.md: 1 for a bad option value or an
unreadable/unwritable file, 2 for an input with nothing usable in it)."""

from __future__ import annotations

import gzip
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from devtools.devstack import free_port
from tests.conftest import python_env

BASE_DIR = Path(__file__).resolve().parent.parent
GOOD = BASE_DIR / "tests" / "data" / "traces" / "starting.jsonl"
pytestmark = pytest.mark.slow  # some sixty manage.py processes


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("bad-inputs")
    (d / "empty.jsonl").write_bytes(b"")
    (d / "empty.jsonl.gz").write_bytes(gzip.compress(b""))
    (d / "header.jsonl").write_bytes(b'{"handoff_trace":1,"cluster":"x"}\n')
    (d / "text.txt").write_bytes(b"hello world\nnot a trace\n")
    (d / "object.json").write_bytes(b'{"a": 1}\n')
    (d / "binary.bin").write_bytes(bytes(range(256)) * 3)
    (d / "scenario.yaml").write_bytes(b"- just\n- a list\n")
    (d / "folder").mkdir()
    return d


@pytest.fixture(scope="module")
def env(inputs: Path, redis_url: str) -> dict[str, str]:
    """A migrated database and a cluster `t` to replay into, on the session's Redis."""
    environment = python_env(HANDOFF_RUN_DIR=str(inputs / "run"), REDIS_URL=redis_url)
    for argv in (["migrate", "-v0"], ["clusters", "add", "t", "--trace", str(GOOD)]):
        done = _run(argv, environment)
        assert done.returncode == 0, done.stdout + done.stderr
    return environment


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *argv],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


M = "{d}/missing-dir/out"  # a path whose directory does not exist
G = str(GOOD)
# (command line, expected exit status)
CASES = [
    ("triage --trace {d}/empty.jsonl", 2),
    ("triage --trace {d}/empty.jsonl.gz", 2),
    ("triage --trace {d}/header.jsonl", 2),
    ("triage --trace {d}/text.txt", 2),
    ("triage --trace {d}/object.json", 2),
    ("triage --trace {d}/binary.bin", 2),
    ("triage --trace {d}/missing.jsonl", 1),
    ("triage --trace {d}/folder", 1),
    (f"triage --trace {G} --stuck-after -1", 1),
    (f"triage --trace {G} --at yesterday", 1),
    ("triage --cluster nope", 1),
    ("convert {d}/empty.jsonl {d}/out.jsonl", 2),
    ("convert {d}/header.jsonl {d}/out.jsonl", 2),
    ("convert {d}/binary.bin {d}/out.jsonl", 2),
    ("convert {d}/missing.jsonl {d}/out.jsonl", 1),
    (f"convert {G} {M}.jsonl", 1),
    ("replay {d}/empty.jsonl --cluster t --no-fold", 2),
    ("replay {d}/header.jsonl --cluster t --no-fold", 2),
    ("replay {d}/text.txt --cluster t --no-fold", 2),
    ("replay {d}/binary.bin --cluster t --no-fold", 2),
    ("replay {d}/missing.jsonl --cluster t --no-fold", 1),
    (f"replay {G} --cluster t --speed -1 --no-fold", 1),
    (f"replay {G} --cluster nope", 1),
    (f"record t --out {M}.jsonl", 1),
    ("record t --out {d}/r.jsonl --duration -1", 1),
    ("record nope --out {d}/r.jsonl", 1),
    ("export-otel --trace {d}/empty.jsonl --out {d}/o.json", 2),
    ("export-otel --trace {d}/header.jsonl --out {d}/o.json", 2),
    ("export-otel --trace {d}/missing.jsonl --out {d}/o.json", 1),
    (f"export-otel --trace {G} --out {M}.json", 1),
    (f"export-otel --trace {G} --out {{d}}/o.json --stuck-after -5", 1),
    (f"export-otel --trace {G} --endpoint not-a-url", 1),
    (f"export-otel --trace {G} --endpoint http://127.0.0.1:{{port}}/v1/traces", 1),
    (f"export-otel --trace {G} --endpoint http://127.0.0.1:{{port}}/ --header nothing", 1),
    ("export-otel --cluster nope --out {d}/o.json", 1),
    ("export-scenario --trace {d}/empty.jsonl --out {d}/s.yaml", 2),
    ("export-scenario --trace {d}/missing.jsonl --out {d}/s.yaml", 1),
    (f"export-scenario --trace {G} --out {M}.yaml", 1),
    ("simulate --duration -1", 1),
    ("simulate --duration 1 --nodes 0", 1),
    ("simulate --duration 1 --churn -2", 1),
    ("simulate --duration 1 --speed 0", 1),
    (f"simulate --duration 1 --record {M}.jsonl", 1),
    ("simulate --duration 1 --serve nonsense", 1),
    ("simulate --duration 1 --serve 127.0.0.1:99999", 1),
    (f"simulate --duration 1 --serve 127.0.0.1:0 --kubeconfig {M}", 1),
    ("simulate --duration 1 --file {d}/missing.yaml", 1),
    ("simulate --duration 1 --file {d}/scenario.yaml", 1),
    ("simulate --duration 1 --faults cut-watch", 1),
    ("clusters remove nope", 1),
    ("bench --only fold --trace {d}/missing.jsonl", 1),
    (f"bench --only fold --trace {G} --json {M}.json", 1),
    ("demo --port 99999", 1),
]


@pytest.fixture(scope="module")
def results(inputs: Path, env: dict[str, str]) -> dict[str, subprocess.CompletedProcess]:
    """Every case run once, a few at a time: each is a whole `manage.py` process."""

    def one(line: str) -> subprocess.CompletedProcess:
        return _run(line.format(d=inputs, port=free_port()).split(), env)

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = pool.map(one, [line for line, _ in CASES])
        return dict(zip([line for line, _ in CASES], done, strict=True))


@pytest.mark.parametrize(("line", "expected"), CASES, ids=[c[0] for c in CASES])
def test_every_command_says_what_is_wrong_in_one_line(
    line: str, expected: int, results: dict[str, subprocess.CompletedProcess]
) -> None:
    done = results[line]
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == expected, output
    reason = done.stderr.strip().splitlines()
    assert reason, "a reason on stderr"
    # The reason is the last line; before it at most the bad lines the input had.
    assert len(reason) <= 3, done.stderr
    assert len(reason[-1]) < 300, reason[-1]


def test_redis_down_is_one_line(inputs: Path, env: dict[str, str]) -> None:
    down = {**env, "REDIS_URL": f"redis://:hunter2@127.0.0.1:{free_port()}/0"}
    for argv in (["status"], ["record", "t", "--out", str(inputs / "r.jsonl")]):
        done = _run(argv, down)
        assert done.returncode == 1
        assert "Traceback" not in done.stdout + done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("cannot reach Redis at redis://:***@127.0.0.1:")
        assert "hunter2" not in line


def test_a_database_never_migrated_is_one_line(tmp_path: Path, redis_url: str) -> None:
    fresh = python_env(HANDOFF_RUN_DIR=str(tmp_path), REDIS_URL=redis_url)
    done = _run(["clusters", "list"], fresh)
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "manage.py migrate" in line
