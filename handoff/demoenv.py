"""Where a running `make demo` publishes its services: ``RUN_DIR/demo.json``.

The demo starts its own redis-server on a free port. It writes that address (and its web
URL) here, and settings read it when ``REDIS_URL`` is unset, so every command from a
second shell reaches the demo's Redis with nothing set by hand. The file names the
supervisor's pid and start time: a file left by a run that was killed outright is ignored.

Plain Python: settings and the supervisor (``devtools/devstack.py``) both import it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FILE = "demo.json"


def process_started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), None if it does not run."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


def publish(run_dir: Path, **services: Any) -> Path:
    """Write the running demo's services (atomically), signed with this process."""
    path = run_dir / FILE
    record = {"pid": os.getpid(), "started": process_started(os.getpid()), **services}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)
    return path


def published(run_dir: Path) -> dict[str, Any] | None:
    """What a demo that is still running published, or None."""
    try:
        record = json.loads((run_dir / FILE).read_text())
        pid, started = int(record["pid"]), record["started"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if process_started(pid) != started:
        return None
    return record


def withdraw(run_dir: Path) -> None:
    """Remove the file if this process wrote it."""
    path = run_dir / FILE
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if isinstance(record, dict) and record.get("pid") == os.getpid():
        path.unlink(missing_ok=True)
