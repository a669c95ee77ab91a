"""``manage.py triage`` in several processes (``offline.fanout``) prints what one process
prints, byte for byte: every kept output (tests/data/triage/digests.json) with its trace
folded by 2 and 3 workers, and a recording with bad lines mixed in, at its end and at an
earlier time; a line's worker read from its bytes is the one its parsed JSON names; a
failed worker fails the command with nothing written."""

from __future__ import annotations

import gzip
import io
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from handoff.offline import fanout, routing
from handoff.sim import Options, find_scenario, run
from tests.offline import triage_outputs as outputs

DEMO = outputs.DATA / "triage" / "demo-120s.jsonl.gz"


def _plain_copies(tmp_path: Path) -> Path:
    """tests/data with the gzipped recordings stored uncompressed under their own names
    (only an uncompressed trace is folded in parallel)."""
    data = tmp_path / "data"
    (data / "triage").mkdir(parents=True)
    (data / "traces").symlink_to(outputs.DATA / "traces")
    for name in outputs.RECORDED:
        (data / "triage" / name).write_bytes(
            gzip.decompress((outputs.DATA / "triage" / name).read_bytes())
        )
    return data


@pytest.mark.slow  # some 140 manage.py processes
def test_every_kept_output_is_printed_by_workers_too(tmp_path: Path) -> None:
    expected = json.loads(outputs.DIGESTS.read_text())
    data = _plain_copies(tmp_path)

    def one(case: tuple[str, tuple[str, ...], int]) -> tuple[str, int, str]:
        trace, args, workers = case
        path = data / trace
        assert fanout.workers_for(path, workers) == workers  # the parallel path is taken
        done = outputs.run(outputs.BASE_DIR, str(path), (*args, "--workers", str(workers)))
        stderr = done.stderr.replace(str(data).encode(), str(outputs.DATA).encode())
        return (
            outputs.key(trace, args),
            workers,
            outputs.digest(done.stdout, stderr, done.returncode),
        )

    cases = [(trace, args, workers) for trace, args in outputs.cases() for workers in (2, 3)]
    with ThreadPoolExecutor(2) as pool:
        found = list(pool.map(one, cases))

    assert [(key, workers) for key, workers, sha in found if sha != expected[key]] == []


def _messy(lines: list[bytes], path: Path) -> Path:
    """A recording with bad lines, blank lines, a second header, a kind Handoff skips, a
    watch ERROR and a cut-off Pod line mixed in."""
    pod = next(line for line in lines if b'"kind":"Pod"' in line)
    odd = [
        b"not json at all\n",
        b"\n",
        b"[1, 2]\n",
        b'{"handoff_trace": 1, "cluster": "again"}\n',
        b'{"observed":"2026-01-01T00:00:30.000000Z","type":"ADDED","object":'
        b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}}\n',
        b'{"observed":"2026-01-01T00:00:31.000000Z","type":"ERROR","object":'
        b'{"kind":"Status","apiVersion":"v1","message":"too old resource version"}}\n',
        pod[: len(pod) // 2] + b"\n",
        b'{"observed":"not a time","type":"ADDED","object":{"kind":"Pod"}}\n',
    ]
    lines = list(lines)
    step = len(lines) // (len(odd) + 1)
    for index, line in enumerate(odd):
        lines.insert((index + 1) * step + index, line)
    path.write_bytes(b"".join(lines))
    return path


@pytest.fixture(scope="module")
def recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo recording (almost every verdict) and the owners scenario (a ReplicaSet
    failing to create pods under its Deployment, a PodGC loop), each made messy."""
    where = tmp_path_factory.mktemp("fanout")
    owners = where / "owners.jsonl"
    run(find_scenario("owners", None), Options(seed=1), record=owners)  # type: ignore[arg-type]
    return {
        "demo": _messy(gzip.decompress(DEMO.read_bytes()).splitlines(keepends=True), where / "d"),
        "owners": _messy(owners.read_bytes().splitlines(keepends=True), where / "o"),
    }


def _triage(path: Path, *args: str) -> tuple[bytes, str]:
    """(stdout bytes, stderr) of ``manage.py triage`` in this process."""
    out, err = io.TextIOWrapper(io.BytesIO(), write_through=True), io.StringIO()
    call_command("triage", "--trace", str(path), *args, stdout=out, stderr=err)
    return out.buffer.getvalue(), err.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["demo", "owners"])
@pytest.mark.parametrize(
    "args",
    [
        ("--format", "json"),
        (),
        ("--format", "json", "--at", "2026-01-01T00:01:00Z", "--stuck-after", "20"),
        ("--at", "2026-01-01T00:00:45Z"),
        ("--format", "json", "--verdict", "stuck", "--verdict", "rejected"),
    ],
)
def test_workers_print_what_one_process_prints(
    recordings: dict[str, Path], name: str, args: tuple[str, ...]
) -> None:
    path = recordings[name]
    one = _triage(path, *args, "--workers", "1")
    assert "not JSON" in one[1]
    assert "second header ignored" in one[1]
    if name == "owners" and "--at" not in args:
        report = json.loads(_triage(path, "--format", "json")[0])
        assert report["owners"]["failing"]
        assert report["owners"]["loops"]
    for workers in (2, 3, 5):
        assert _triage(path, *args, "--workers", str(workers)) == one, workers


def test_a_line_read_from_its_bytes_goes_where_its_json_says() -> None:
    traces = [*sorted((outputs.DATA / "traces").glob("*.jsonl"))]
    traces += [outputs.DATA / "triage" / name for name in outputs.RECORDED]
    for trace in traces:
        raw = trace.read_bytes()
        lines = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).splitlines()
        read = 0
        for line in lines:
            fast = routing._name_from_bytes(line)
            if fast is not routing._UNKNOWN:
                read += 1
                assert fast == routing._name_from_json(line), (trace.name, line[:200])
        if trace.name in outputs.RECORDED:  # the simulator writes the shapes read from bytes
            assert read >= 0.85 * len(lines), trace.name


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_a_worker_reads_the_lines_worker_of_gives_it(
    recordings: dict[str, Path], workers: int
) -> None:
    """``routing.Share`` (the workers' loop, its steps inlined) against ``worker_of``, the
    same choice a call at a time: every line is read by exactly its worker, or by all
    when it is about no pod, and ``lines`` counts them all."""
    traces = [*sorted((outputs.DATA / "traces").glob("*.jsonl")), *recordings.values()]
    for trace in traces:
        lines = trace.read_bytes().splitlines(keepends=True)
        for index in range(workers):
            share = routing.Share(iter(lines), index, workers)
            read = [(number, raw, shared) for number, raw, shared in share]
            expected = []
            for number, raw in enumerate(lines, 1):
                owner = routing.worker_of(raw, workers)
                if owner in (index, routing.SHARED):
                    expected.append((number, raw, owner == routing.SHARED))
            assert read == expected, (trace.name, index)
            assert share.lines == len(lines)


def test_the_rank_order_merges_the_workers_pods_as_one_sort_would() -> None:
    keys = [
        [(-3, 5.0, "a", "x", "1"), (-1, 2.0, "b", "y", "2"), (0, math.inf, "c", "z", "3")],
        [],
        [(-3, 1.0, "z", "a", "4"), (-1, 2.0, "a", "q", "5"), (-1, 2.0, "b", "y", "6")],
    ]
    order = fanout._rank_order(keys)
    every = [key for part in keys for key in part]
    assert [every[index] for index in order] == sorted(every)
    assert order == [3, 0, 4, 1, 5, 2]


def _fail_judging(*args: object) -> None:
    raise RuntimeError("judging broke")


def _fail_making(*args: object) -> None:
    raise RuntimeError("views broke")


def _end_folding(*args: object) -> None:
    os._exit(3)


@pytest.mark.parametrize(
    ("where", "replacement", "message"),
    [
        ("_judge_share", _fail_judging, "failed: RuntimeError('judging broke')"),
        ("_make_share", _fail_making, "failed: RuntimeError('views broke')"),
        ("_fold_share", _end_folding, "ended without a result (exit code 3)"),
    ],
)
def test_a_failed_worker_fails_the_command_with_nothing_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str, replacement: object, message: str
) -> None:
    path = tmp_path / "demo.jsonl"
    path.write_bytes(gzip.decompress(DEMO.read_bytes()))
    monkeypatch.setattr(fanout, where, replacement)  # the forked workers inherit it
    out = io.TextIOWrapper(io.BytesIO(), write_through=True)
    for form in ("json", "table"):
        with pytest.raises(CommandError, match="triage worker") as failed:
            call_command(
                "triage", "--trace", str(path), "--format", form, "--workers", "2", stdout=out
            )
        assert message in str(failed.value)
    assert out.buffer.getvalue() == b""  # type: ignore[attr-defined]


def test_small_or_compressed_traces_are_folded_in_one_process(tmp_path: Path) -> None:
    plain = tmp_path / "demo.jsonl"
    plain.write_bytes(gzip.decompress(DEMO.read_bytes()))

    assert fanout.workers_for(plain) == 1  # under MIN_BYTES
    assert fanout.workers_for(DEMO, 4) == 1  # gzip
    assert fanout.workers_for(plain, 4) == 4
    assert fanout.workers_for(tmp_path / "missing.jsonl", 4) == 1


@pytest.mark.parametrize(("load", "workers"), [(0.0, 4), (0.4, 4), (1.6, 2), (2.6, 1), (9.0, 1)])
def test_workers_go_to_idle_cores_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, load: float, workers: int
) -> None:
    plain = tmp_path / "demo.jsonl"
    plain.write_bytes(gzip.decompress(DEMO.read_bytes()))
    monkeypatch.setattr(fanout, "MIN_BYTES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (load, 0.0, 0.0))
    monkeypatch.setattr(fanout, "LOADAVG", tmp_path / "no-such-file")  # not Linux

    assert fanout.workers_for(plain) == workers
    assert fanout.workers_for(plain, 3) == 3  # asked for: whatever the load


@pytest.mark.parametrize(
    ("running", "workers"), [(["1"], 4), (["2"], 3), (["3", "4"], 2), (["6"], 1), (["1", "3"], 3)]
)
def test_workers_go_to_the_cores_idle_now_not_a_minute_ago(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, running: list[str], workers: int
) -> None:
    """The load average still holds work that has ended (an operator's previous triage):
    the threads running now decide, ourselves left out, averaged over the readings."""
    plain = tmp_path / "demo.jsonl"
    plain.write_bytes(gzip.decompress(DEMO.read_bytes()))
    monkeypatch.setattr(fanout, "MIN_BYTES", 0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.setattr(os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    readings = iter(running * (fanout.BUSY_SAMPLES // len(running)))
    loadavg = tmp_path / "loadavg"

    class Reading(type(loadavg)):
        def read_bytes(self) -> bytes:
            return f"9.00 9.00 9.00 {next(readings)}/300 4242\n".encode()

    monkeypatch.setattr(fanout, "LOADAVG", Reading(loadavg))

    assert fanout.workers_for(plain) == workers


def test_an_unreadable_run_queue_falls_back_to_the_load_average(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    garbled = tmp_path / "loadavg"
    garbled.write_bytes(b"not the kernel's format\n")
    monkeypatch.setattr(fanout, "LOADAVG", garbled)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 0.0, 0.0))
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})

    assert fanout.busy_now() is None
    assert fanout.idle_cores() == 1
