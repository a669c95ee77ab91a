"""Running ``kubectl handoff`` the way an operator does: kubectl itself, finding the plugin
on PATH (bin/kubectl-handoff)."""

from __future__ import annotations

import os
import subprocess

from tests.alerting.tools import ROOT, binary

BIN = ROOT / "bin"


def kubectl(*args: str, **env: str) -> subprocess.CompletedProcess:
    """``kubectl ARGS`` with the plugin on PATH and only the environment given (no
    HANDOFF_SERVER/HANDOFF_TOKEN/KUBECONFIG of whoever runs the tests)."""
    clean = {k: v for k, v in os.environ.items() if k not in ("HANDOFF_SERVER", "HANDOFF_TOKEN")}
    clean.update(PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", NO_COLOR="1", **env)
    return subprocess.run(
        [binary("kubectl", "kubernetes-client"), *args],
        env=clean,
        capture_output=True,
        text=True,
        timeout=180,
    )


def one_line_error(result: subprocess.CompletedProcess) -> str:
    """The error of a failed run, checked to be kubectl-like: exit 1, nothing on stdout,
    one line on stderr starting with "error: ", no traceback."""
    assert result.returncode == 1, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]
