"""Two runs' situations side by side: what differs, per situation, and the count."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devtools.fidelity.situations import Situation

EXACT = ("verdict", "binding", "reason", "events", "messages", "updates")
TIMED = ("deletion_asked", "deleted")


@dataclass
class Difference:
    """One fact the two runs disagree on: the simulator's value and the real one's."""

    fact: str
    simulator: Any
    real: Any


@dataclass
class Compared:
    key: str
    differences: list[Difference] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return not self.differences


def compare(
    simulated: dict[str, Situation], real: dict[str, Situation], tolerance: float
) -> list[Compared]:
    """Every situation of either run, in key order; times differ beyond ``tolerance``
    seconds only (the real controllers act on their own ticks)."""
    out = []
    for key in sorted(set(simulated) | set(real)):
        sim, live = simulated.get(key), real.get(key)
        compared = Compared(key)
        if sim is None or live is None:
            compared.differences.append(Difference("present", sim is not None, live is not None))
        else:
            compared.differences = _differences(sim.facts(), live.facts(), tolerance)
        out.append(compared)
    return out


def _differences(sim: dict[str, Any], real: dict[str, Any], tolerance: float) -> list[Difference]:
    found = [Difference(f, sim[f], real[f]) for f in EXACT if sim[f] != real[f]]
    for fact in TIMED:
        a, b = sim[fact], real[fact]
        if (a is None) != (b is None) or (a is not None and abs(a - b) > tolerance):
            found.append(Difference(fact, a, b))
    return found


def summary(compared: list[Compared]) -> str:
    same = sum(1 for c in compared if c.identical)
    return f"{len(compared)} situations, {same} identical"


def as_json(compared: list[Compared], header: dict[str, Any]) -> dict[str, Any]:
    return {
        **header,
        "situations": [
            {
                "key": c.key,
                "identical": c.identical,
                "differences": [
                    {"fact": d.fact, "simulator": d.simulator, "real": d.real}
                    for d in c.differences
                ],
            }
            for c in compared
        ],
        "total": len(compared),
        "identical": sum(1 for c in compared if c.identical),
    }


def as_text(compared: list[Compared]) -> list[str]:
    """One line per identical situation, a block per different one."""
    lines = []
    for c in compared:
        lines.append(f"{c.key}: {'identical' if c.identical else 'differs'}")
        for d in c.differences:
            lines += _difference_lines(d)
    lines.append(summary(compared))
    return lines


def _difference_lines(d: Difference) -> list[str]:
    if d.fact in ("events", "messages", "updates") and isinstance(d.simulator, list):
        if d.fact != "updates":
            only_sim = [e for e in d.simulator if e not in d.real]
            only_real = [e for e in d.real if e not in d.simulator]
            return [f"  {d.fact} only in the simulator: {e}" for e in only_sim] + [
                f"  {d.fact} only on the real control plane: {e}" for e in only_real
            ]
        return [
            f"  updates, simulator: {' | '.join(d.simulator)}",
            f"  updates, real:      {' | '.join(d.real)}",
        ]
    return [f"  {d.fact}: simulator {_shown(d.simulator)}, real {_shown(d.real)}"]


def _shown(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}s"
    return str(value)
