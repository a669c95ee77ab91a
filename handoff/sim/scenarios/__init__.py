"""Named scenarios (``catalog``) and what a scenario is (``base``).

See docs/simulator.md for what each one shows and the verdicts it should produce.
"""

from handoff.sim.scenarios.base import Options, Scenario
from handoff.sim.scenarios.catalog import SCENARIOS, handoff_failures, manual_scheduling, register

__all__ = ["SCENARIOS", "Options", "Scenario", "handoff_failures", "manual_scheduling", "register"]
