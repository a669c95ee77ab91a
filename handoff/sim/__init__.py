"""The Handoff cluster simulator: pure Python, no Django, no Redis.

``run(find_scenario("manual-scheduling", None), Options(seed=1), record="x.jsonl")`` builds a
cluster, runs its script on a virtual clock and records the watch streams as trace v1.
"""

from handoff.sim.cluster import Cluster, ClusterConfig
from handoff.sim.runner import RunStats, find_scenario, run
from handoff.sim.scenarios import SCENARIOS, Options, Scenario

__all__ = [
    "SCENARIOS",
    "Cluster",
    "ClusterConfig",
    "Options",
    "RunStats",
    "Scenario",
    "find_scenario",
    "run",
]
