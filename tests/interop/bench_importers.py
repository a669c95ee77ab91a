"""How fast the importers read big kubectl outputs (docs/interop.md, "Speed").

    .venv/bin/python -m tests.interop.bench_importers [PODS]

Writes, in a temporary directory, PODS (default 50,000) copies of a running pod from a
simulator run as ``kubectl get pods -A -o json`` prints them (one indented List) and as
``kubectl get pods -w --output-watch-events -o json`` prints them (indented events one
after another), then reads each three times through ``open_events``. Prints medians.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from handoff.core.trace import read_all
from handoff.interop.importers import open_events
from handoff.sim.runner import find_scenario, run
from handoff.sim.scenarios import Options


def _running_pod(directory: Path) -> dict:
    trace = directory / "sim.jsonl"
    run(find_scenario("manual-scheduling", None), Options(seed=1), record=trace)
    events, _ = read_all(trace)
    for event in events:
        obj = json.loads(event.raw)["object"] if event.raw else {}
        if obj.get("kind") == "Pod" and (obj.get("status") or {}).get("phase") == "Running":
            return obj
    raise SystemExit("no running pod in the simulator run")


def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        pod = _running_pod(directory)
        items = []
        for i in range(count):
            item = json.loads(json.dumps(pod))
            item["metadata"].update(name=f"p{i}", uid=f"uid-{i}")
            items.append(item)
        listing = directory / "pods.json"
        listing.write_text(
            json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4)
        )
        watch = directory / "watch.json"
        with watch.open("w") as out:
            for item in items:
                out.write(json.dumps({"type": "MODIFIED", "object": item}, indent=4) + "\n")
        for path in (listing, watch):
            size = path.stat().st_size / 1e6
            runs = []
            for _ in range(3):
                started = time.perf_counter()
                read = sum(1 for _ in open_events(path))
                runs.append(time.perf_counter() - started)
            median = statistics.median(runs)
            print(
                f"{path.name}: {size:.0f} MB, {read} objects, median {median:.2f} s "
                f"= {read / median:,.0f} objects/s, {size / median:.0f} MB/s"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 50_000)
