"""What a scenario is: the command-line knobs it reads and how it builds its cluster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from handoff.sim.clock import EPOCH
from handoff.sim.cluster import Cluster


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


@dataclass
class Scenario:
    name: str
    build: Callable[[Options], Cluster]
    duration: float | None  # default virtual length; None runs until stopped
    summary: str
