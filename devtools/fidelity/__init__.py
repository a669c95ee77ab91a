"""``manage.py fidelity``: one scenario on the built-in simulator and attached to a real
control plane, compared situation by situation (docs/simulator.md, "Where the simulator
departs from a real control plane").

``runs`` records the two runs, ``situations`` reads what each pod and node went through,
``compare`` says what differs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools import controlplane, kubeassets
from devtools.fidelity import runs
from devtools.fidelity.compare import Compared, as_json, as_text, compare, summary
from devtools.fidelity.situations import situations
from handoff.sim.scenarios.base import Scenario

__all__ = ["Fidelity", "Settings", "as_json", "as_text", "measure", "real_control_plane", "summary"]


@dataclass(frozen=True)
class Settings:
    scenario: Scenario
    duration: float
    version: str | None  # the simulator's shapes; None: the API server's release
    tolerance: float = 30.0
    stuck_after: float = 60.0
    context: str | None = None


@dataclass
class Fidelity:
    compared: list[Compared]
    header: dict[str, Any]

    def json(self) -> dict[str, Any]:
        return as_json(self.compared, self.header)

    def text(self) -> list[str]:
        return [self.header["title"], *as_text(self.compared)]

    @property
    def identical(self) -> int:
        return sum(1 for c in self.compared if c.identical)


def measure(settings: Settings, kubeconfig: str, workdir: Path) -> Fidelity:
    """Run the scenario attached (first: its release decides the simulator's shapes when
    no version is given), then on the simulator; compare."""
    real = runs.attached(
        settings.scenario, settings.duration, kubeconfig, workdir / "real.jsonl", settings.context
    )
    version = settings.version or real.version
    simulated = runs.on_simulator(
        settings.scenario, settings.duration, version, workdir / "simulator.jsonl"
    )
    compared = compare(
        situations(simulated, settings.stuck_after),
        situations(real, settings.stuck_after),
        settings.tolerance,
    )
    header = {
        "title": (
            f"fidelity of {settings.scenario.name} ({settings.duration:.0f} s): the simulator "
            f"as Kubernetes {version} vs the control plane at {real.server} "
            f"({real.version}), times within {settings.tolerance:.0f} s"
        ),
        "scenario": settings.scenario.name,
        "duration": settings.duration,
        "simulator_version": version,
        "server": real.server,
        "server_version": real.version,
        "tolerance": settings.tolerance,
    }
    return Fidelity(compared, header)


@contextmanager
def real_control_plane(say: Callable[[str], object] = lambda _: None) -> Iterator[str]:
    """A control plane of its own from HANDOFF_K8S_ASSETS (devtools/controlplane.py), for
    the duration: its admin kubeconfig. ``kubeassets.AssetsMissing`` names the variable."""
    binaries = kubeassets.find_binaries()
    with tempfile.TemporaryDirectory(prefix="handoff-fidelity-") as folder:
        say("starting a control plane from HANDOFF_K8S_ASSETS...")
        plane = controlplane.start(Path(folder), binaries)
        try:
            yield str(plane.admin_kubeconfig)
        finally:
            plane.stop()
