"""The parallel triage's JSON views (``offline.viewspool``): spooled by each worker in its
order, written by the parent in the report's order — to a file (``os.writev``), to a
stream with no file under it, after a short write — the same bytes as the one-process
writer (``report.write_dumped_json``)."""

from __future__ import annotations

import io
import os
import random
from pathlib import Path

import orjson
import pytest

from handoff.core.report import json_frame, write_dumped_json
from handoff.offline import viewspool

HEAD = {"evaluated_at": "2026-01-01T00:00:00.000000Z", "cluster": None, "stuck_after": 60.0}


def _views(count: int, seed: int) -> list[bytes]:
    chooser = random.Random(seed)
    return [
        orjson.dumps({"uid": f"u{seed}-{n}", "pad": "x" * chooser.randint(0, 3000)})
        for n in range(count)
    ]


def _spooled(parts: list[list[bytes]]) -> tuple[list[io.BufferedRandom], list[object]]:
    spools = [viewspool.new_spool() for _ in parts]
    sizes = [
        viewspool.spool_views(spool, views) for spool, views in zip(spools, parts, strict=True)
    ]
    return spools, sizes  # type: ignore[return-value]


def _expected(views: list[bytes]) -> bytes:
    out = io.BytesIO()
    write_dumped_json(out, HEAD, views)
    return out.getvalue()


# Worker parts of 0 to 2,500 views: empty spools, fewer and more than a write's batch.
PARTS = [(1500, 0, 2500), (0, 1, 0), (0, 0, 0), (1, 0, 0), (3, 2, 1)]


@pytest.mark.parametrize("counts", PARTS)
@pytest.mark.parametrize("target", ["file", "no file"])
def test_spooled_views_come_out_in_the_reports_order(
    tmp_path: Path, counts: tuple[int, ...], target: str
) -> None:
    parts = [_views(count, seed) for seed, count in enumerate(counts)]
    every = [view for part in parts for view in part]
    order = list(range(len(every)))
    random.Random(7).shuffle(order)
    spools, sizes = _spooled(parts)
    opening, closing = json_frame(HEAD)

    if target == "file":
        with open(tmp_path / "report.json", "wb") as out:
            out.write(b"")  # something buffered first: flushed before the writes
            viewspool.write_in_order(out, opening, spools, sizes, order, closing)  # type: ignore[arg-type]
        written = (tmp_path / "report.json").read_bytes()
    else:
        buffer = io.BytesIO()
        viewspool.write_in_order(buffer, opening, spools, sizes, order, closing)  # type: ignore[arg-type]
        written = buffer.getvalue()

    assert written == _expected([every[index] for index in order])
    if every:
        assert orjson.loads(written)["pods"][0] == orjson.loads(every[order[0]])


def test_a_short_write_is_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [_views(700, 1), _views(900, 2)]
    every = [view for part in parts for view in part]
    order = list(range(len(every)))[::-1]
    spools, sizes = _spooled(parts)
    real = os.writev
    short: list[int] = []

    def writev_part(fd: int, buffers: list[bytes]) -> int:
        """Write a third of what was asked, as a full disk or a signal may."""
        whole = b"".join(buffers)
        short.append(len(whole))
        return real(fd, [whole[: len(whole) // 3]])

    monkeypatch.setattr(os, "writev", writev_part)
    opening, closing = json_frame(HEAD)
    with open(tmp_path / "report.json", "wb") as out:
        viewspool.write_in_order(out, opening, spools, sizes, order, closing)  # type: ignore[arg-type]

    assert len(short) == 2  # 1,602 pieces: two batches, each cut short
    assert (tmp_path / "report.json").read_bytes() == _expected([every[i] for i in order])


def test_spools_that_cannot_be_mapped_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = [_views(40, 1), _views(30, 2)]
    every = [view for part in parts for view in part]
    order = list(range(len(every)))[::-1]
    spools, sizes = _spooled(parts)

    def unmappable(*args: object, **kwargs: object) -> None:
        raise OSError(19, "No such device")  # ENODEV: the file system maps no files

    monkeypatch.setattr(viewspool.mmap, "mmap", unmappable)
    buffer = io.BytesIO()
    opening, closing = json_frame(HEAD)
    viewspool.write_in_order(buffer, opening, spools, sizes, order, closing)  # type: ignore[arg-type]
    assert buffer.getvalue() == _expected([every[i] for i in order])
