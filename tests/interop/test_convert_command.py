"""manage.py convert: any importer input to trace v1 that triage and replay read as is."""

from __future__ import annotations

import gzip
import io

import pytest
from django.core.management import CommandError, call_command

from handoff.core.report import build_report
from handoff.core.timeline import fold
from handoff.core.trace import read_all
from handoff.interop.importers import open_events
from handoff.offline.triage import fold_file
from tests.real_data import REAL, real_files


def _convert(*args):
    out, err = io.StringIO(), io.StringIO()
    call_command("convert", *map(str, args), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize("path", real_files(), ids=lambda p: p.name[:60])
def test_it_converts_every_real_file_to_a_trace_triage_agrees_with(path, tmp_path):
    target = tmp_path / "out.jsonl.gz"
    if not any(event.raw for event in open_events(path)):
        # Nothing Handoff reads (an audit log of other resources): exit 2, as triage and
        # replay do for it, the skipped kinds said, no OUT left behind.
        with pytest.raises(SystemExit) as exit_:
            _convert(path, target, "--cluster", "real")
        assert exit_.value.code == 2
        assert not target.exists()
        return
    out, err = _convert(path, target, "--cluster", "real")

    assert err == ""
    assert target.read_bytes()[:2] == b"\x1f\x8b"
    timeline, reader = fold_file(target)
    assert reader.errors == []
    assert timeline.cluster == "real"
    direct = build_report(fold(open_events(path)))
    converted = build_report(timeline)
    assert [(p["uid"], p["verdict"], p["reason"], p["milestones"]) for p in converted["pods"]] == [
        (p["uid"], p["verdict"], p["reason"], p["milestones"]) for p in direct["pods"]
    ]
    assert f"{len(read_all(target)[0])} watch events written" in out


def test_it_reports_bad_lines_and_converts_the_rest(tmp_path):
    good = (REAL / "ManageIQ__kubeclient__test_json_watch_stream.json").read_bytes()
    source = tmp_path / "mixed.json.gz"
    source.write_bytes(gzip.compress(good + b"garbage here\n" + good))

    out, err = _convert(source, tmp_path / "out.jsonl")

    assert "mixed.json.gz: line 4: " in err
    assert "watch input, 6 watch events written" in out


def test_it_exits_2_when_nothing_is_readable(tmp_path):
    source = tmp_path / "junk.bin"
    source.write_bytes(b"\x00\xff garbage {\n")
    target = tmp_path / "out.jsonl"

    with pytest.raises(SystemExit) as exit_:
        _convert(source, target)

    assert exit_.value.code == 2
    assert not target.exists()


def test_it_refuses_a_missing_input(tmp_path):
    with pytest.raises(CommandError, match="cannot read"):
        _convert(tmp_path / "nope.json", tmp_path / "out.jsonl")


def test_it_keeps_a_traces_header_and_names_the_format_otherwise(tmp_path):
    from handoff.core.trace import TraceReader, TraceWriter

    trace = tmp_path / "in.jsonl"
    with TraceWriter(trace, cluster="prod", source="simulator:x:seed=1") as writer:
        writer.write(
            "2026-03-01T10:00:00.000000Z", "ADDED", {"kind": "Node", "metadata": {"name": "n"}}
        )
    _convert(trace, tmp_path / "same.jsonl")
    _convert(REAL / "ManageIQ__kubeclient__test_json_watch_stream.json", tmp_path / "w.jsonl")

    kept = TraceReader(tmp_path / "same.jsonl")
    list(kept)
    named = TraceReader(tmp_path / "w.jsonl")
    list(named)
    assert (kept.header.cluster, kept.header.source) == ("prod", "simulator:x:seed=1")
    assert named.header.source == "import:watch"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_it_shows_a_progress_bar_on_a_terminal_for_large_inputs(tmp_path):
    import json

    pods = [
        {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": f"p{i}", "uid": f"u{i}"},
            "spec": {"containers": [{"name": "c", "image": "x" * 200}]},
        }
        for i in range(4000)
    ]
    source = tmp_path / "big.json"
    source.write_text(json.dumps({"kind": "List", "items": pods}, indent=4))
    err = _Terminal()

    call_command(
        "convert", str(source), str(tmp_path / "out.jsonl"), stdout=io.StringIO(), stderr=err
    )

    assert source.stat().st_size > 1 << 20
    assert "\r[" in err.getvalue()
    assert "100% of" in err.getvalue()
