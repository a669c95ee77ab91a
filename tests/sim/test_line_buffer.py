"""The recording's fast line encoder writes exactly what ``encode_event`` would."""

from __future__ import annotations

import io

from handoff.core.trace import TraceWriter, encode_event, format_time
from handoff.sim.clock import EPOCH
from handoff.sim.runner import LineBuffer


def test_it_encodes_lines_byte_for_byte_as_encode_event() -> None:
    out = io.BytesIO()
    writer = TraceWriter(out)
    header = out.getvalue()
    buffer = LineBuffer(writer, batch=3)
    obj = {"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "é"}}}
    moments = [EPOCH, EPOCH + 0.0000004, EPOCH + 0.9999996, EPOCH + 59.5, EPOCH + 86399.123456]
    for i, moment in enumerate(moments):
        buffer.add(moment, ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")[i], obj)
    buffer.flush()
    expected = b"".join(
        encode_event(format_time(m), t, obj)
        for m, t in zip(moments, ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"), strict=True)
    )
    assert out.getvalue()[len(header) :] == expected
