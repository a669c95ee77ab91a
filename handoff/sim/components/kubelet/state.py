"""What every part of one kubelet shares: its timings, the per-pod state its pod workers
keep, how a workload's containers behave, and the attributes the managers read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from handoff.sim.clock import Loop
from handoff.sim.components.apiserver import APIServer
from handoff.sim.components.events import CoreRecorder
from handoff.sim.objects import Obj


@dataclass
class KubeletTimings:
    watch: tuple[float, float] = (0.002, 0.020)
    admit: tuple[float, float] = (0.005, 0.040)
    status: tuple[float, float] = (0.020, 0.200)
    sandbox: tuple[float, float] = (0.3, 1.5)
    pull: tuple[float, float] = (0.8, 4.0)
    create: tuple[float, float] = (0.05, 0.3)
    start: tuple[float, float] = (0.02, 0.2)
    ready: tuple[float, float] = (0.0, 2.0)
    init_run: tuple[float, float] = (0.5, 3.0)
    pleg: tuple[float, float] = (0.05, 1.0)  # generic PLEG relists every second
    kill: tuple[float, float] = (0.3, 2.5)
    image_size: tuple[int, int] = (5_000_000, 250_000_000)
    node_status_frequency: float = 10.0
    node_status_report: float = 300.0
    lease_renew: float = 10.0
    mirror_recreate: tuple[float, float] = (0.5, 4.0)
    file_check: float = 20.0
    backoff_initial: float = 10.0
    backoff_max: float = 300.0


@dataclass
class Behaviour:
    """How a workload's containers behave, read from pod annotations the scenarios set.

    ``sim.handoff/run-seconds``: containers exit after this long (exit code 0 unless
    ``sim.handoff/exit-code``); ``sim.handoff/crash``: exit 1 every time (crash loop).
    """

    run_for: float | None = None
    exit_code: int = 0

    @staticmethod
    def of(pod: Obj) -> Behaviour:
        ann = pod["metadata"].get("annotations") or {}
        if ann.get("sim.handoff/crash"):
            return Behaviour(float(ann["sim.handoff/crash"]), 1)
        run = ann.get("sim.handoff/run-seconds")
        if run is None:
            return PLAIN
        return Behaviour(float(run), int(ann.get("sim.handoff/exit-code", "0")))


PLAIN = Behaviour()  # never mutated: shared by every pod without behaviour annotations


def _plain() -> Behaviour:
    return PLAIN


@dataclass(slots=True)
class PodState:
    pod: Obj
    uid: str
    cpu: int = 0
    mem: int = 0
    static: bool = False
    phase: str = "Pending"
    start_time: float = 0.0
    sandbox: bool = False
    pod_ip: str = ""
    init: list[Obj] = field(default_factory=list)
    app: list[Obj] = field(default_factory=list)
    ready: bool = False
    terminating: bool = False
    done: bool = False
    status_pending: bool = False
    behaviour: Behaviour = field(default_factory=_plain)
    pull_backoff: float = 0.0
    crash_backoff: float = 0.0
    generation: int = 0
    released: bool = False
    seen: float = 0.0


def minor_version(version: str) -> tuple[int, int]:
    """(1, 20) for "v1.20.2": the release a kubelet's shapes follow."""
    major, _, rest = version.lstrip("v").partition(".")
    digits = "".join(ch for ch in rest.split(".")[0] if ch.isdigit())
    return int(major or 1), int(digits or 0)


# What changed with the kubelet's release (FIDELITY_AUDIT.md's version key).
REJECTED_PREFIX_SINCE = (1, 26)  # "Pod " + m -> "Pod was rejected: " + m, PR #112644
QOS_ON_REJECTION_SINCE = (1, 26)  # qosClass in a rejected pod's status
SANDBOX_CONDITION_SINCE = (1, 29)  # PodReadyToStartContainers on by default, PR #119659
PREDICATE_DESCRIPTION_SINCE = (1, 31)  # "Predicate X failed: <desc>", PR #125498
TAINT_ADMISSION_SINCE = (1, 22)  # NoExecute TaintToleration at admission, PR #101218


class KubeletBase:
    """The attributes of one kubelet that its managers (node status, admission, eviction, pod
    workers, status manager, static pods) share; ``Kubelet`` sets them."""

    api: APIServer
    loop: Loop
    t: KubeletTimings
    name: str
    node_template: Obj
    ip: str
    host_ips: list[Obj]
    state: str  # running, hung (heartbeats only), stopped or dead
    recorder: CoreRecorder
    pods: dict[str, PodState]
    used_cpu: int
    used_mem: int
    used_pods: int
    images: set[str]
    frozen: list[tuple[Callable[..., Any], tuple[Any, ...]]]
    static: dict[str, Obj]
    static_states: dict[str, PodState]
    mirrors: dict[str, str]
    last_report: float
    not_ready: str | None
    memory_pressure: int
    pressure_until: float
    die_on_pickup: bool
    ip_seq: int
    ip_prefix: str
    version: tuple[int, int]  # (major, minor) of status.nodeInfo.kubeletVersion
    condition_types: tuple[str, ...]  # the pod conditions this version writes
    _in_order: tuple[Obj | None, tuple[str | None, bool]]
