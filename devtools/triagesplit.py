"""One offline triage timed stage by stage on CPU, for the bench (``devtools.bench.triage``).

``python -m devtools.triagesplit TRACE json|table`` runs what ``manage.py triage --trace
TRACE --format F --workers 1`` (one process) runs after its start-up — the same functions,
in the same order, the report written to /dev/null — and prints as JSON the pods and
events folded and the CPU seconds of each stage: ``read_fold``, ``judge_report``
(judging every pod, ranking them, making their views or table rows) and ``write``
(serialising and writing). Start-up is timed on the command itself. A module of its
own, outside ``devtools.bench``: importing that package would load the bench's services
into the process being timed.
"""

from __future__ import annotations

import json
import os
import sys
import time


def split(path: str, form: str) -> dict[str, float]:
    """The stages' CPU seconds, and what was folded."""
    from handoff.core.gcpause import paused_gc
    from handoff.core.report import build_rows, pod_views, write_views_json
    from handoff.interop.exporters.tables import render_table
    from handoff.offline.triage import fold_file

    clock = time.process_time
    start = clock()
    timeline, reader = fold_file(path)
    folded = clock()
    with open(os.devnull, "wb") as out:
        if form == "json":
            head, views = pod_views(timeline, errors=reader.errors)
            with paused_gc():
                made = list(views)
            reported = clock()
            with paused_gc():
                write_views_json(out, head, made)
        else:
            rows = build_rows(timeline, errors=reader.errors)
            reported = clock()
            out.write((render_table(rows) + "\n").encode())
        out.flush()
    written = clock()
    return {
        "pods": len(timeline.pods),
        "events": timeline.events_applied,
        "read_fold": folded - start,
        "judge_report": reported - folded,
        "write": written - reported,
    }


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("json", "table"):
        sys.exit("usage: python -m devtools.triagesplit TRACE json|table")
    print(json.dumps(split(sys.argv[1], sys.argv[2])))
