"""What a scenario is: the command-line knobs it reads and how it builds its cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from handoff.sim.attached import Remote
from handoff.sim.clock import EPOCH
from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.versions import NEWEST, configure


@dataclass
class Options:
    """Command-line knobs a scenario may read."""

    seed: int = 0
    duration: float | None = None
    nodes: int | None = None
    pods: int | None = None
    churn: float | None = None
    file: str | None = None
    start: float = EPOCH  # virtual time zero (epoch seconds)
    remote: Remote | None = None  # simulate --attach: the real API server
    # MAJOR.MINOR whose shapes to follow (sim/versions.py): a current release by default;
    # None keeps the simulator's pre-version defaults (ClusterConfig), a mix of releases.
    k8s_version: str | None = NEWEST

    def cluster_config(self, name: str) -> ClusterConfig:
        """The cluster knobs these options set, for a scenario called ``name``."""
        config = ClusterConfig(name=name, seed=self.seed, start=self.start, remote=self.remote)
        return configure(config, self.k8s_version) if self.k8s_version else config


@dataclass
class Scenario:
    name: str
    build: Callable[[Options], Cluster]
    duration: float | None  # default virtual length; None runs until stopped
    summary: str
    # Runs attached to a real control plane: it needs none of the simulator's own
    # scheduler, controllers or races staged inside them (docs/simulator.md).
    attachable: bool = False
    # Virtual seconds already run when the cluster is served (``simulate --serve``): the
    # first list finds a cluster with a past, as a real one has.
    lead: float = 0.0
