"""An interim ``control_plane`` session fixture for the attach tests, until branch ``k8s``'s
``tests/k8s/conftest.py`` (same fixture name; the attributes used here, ``server``,
``admin_kubeconfig`` and ``version``, are the ones its ``devtools.controlplane.ControlPlane``
has) lands on main. Then the test modules drop their import of this one and this file goes.

It wraps the reference start script: ``HANDOFF_K8S_ASSETS`` names the folder holding
``control-plane`` and its ``k8s-bin.tar.xz``. Without it the tests skip with one line naming
the variable; with ``CI=true`` they fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

VARIABLE = "HANDOFF_K8S_ASSETS"


@dataclass
class ControlPlane:
    directory: Path
    port: int
    version: str = "v1.20.2"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"


def _free_port() -> int:
    """A loopback port whose next two are free as well (etcd client and peer)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 2 < 65536 and all(_free(port + i) for i in (1, 2)):
            return port
    raise RuntimeError("no three free loopback ports in a row")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assets = os.environ.get(VARIABLE, "")
    script = Path(assets) / "control-plane"
    if not assets or not script.exists():
        message = f"{VARIABLE} is not set to a folder with the control-plane script"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    plane = ControlPlane(tmp_path_factory.mktemp("cp-attach"), _free_port())
    env = {**os.environ, "K8S_PORT": str(plane.port)}
    up = subprocess.run(
        ["bash", str(script), "up", str(plane.directory)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if up.returncode != 0:
        pytest.fail(f"control plane did not start: {up.stderr.strip()[-500:]}", pytrace=False)
    yield plane
    subprocess.run(["bash", str(script), "down", str(plane.directory)], env=env, timeout=60)
