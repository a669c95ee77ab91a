"""Running a scenario: recording to a trace, pacing against the wall clock, counting.

The only module of the simulator that reads the wall clock, and only for pacing and stats.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import orjson

from handoff.core.gcpause import paused_gc
from handoff.core.trace import TraceWriter, format_time
from handoff.sim.cluster import Cluster
from handoff.sim.objects import Obj
from handoff.sim.recording import Recording
from handoff.sim.scenarios import SCENARIOS, Options, Scenario

if TYPE_CHECKING:
    from handoff.sim.serve.faults import Fault
    from handoff.sim.serve.server import SimServer


@dataclass
class RunStats:
    scenario: str
    seed: int
    virtual_seconds: float
    wall_seconds: float
    lines: int
    changes: int
    pods: int
    nodes: int

    @property
    def lines_per_wall_second(self) -> float:
        return self.lines / self.wall_seconds if self.wall_seconds else 0.0

    def describe(self) -> str:
        return (
            f"{self.scenario} seed={self.seed}: {self.virtual_seconds:.0f} s virtual in "
            f"{self.wall_seconds:.2f} s wall, {self.lines} trace lines "
            f"({self.lines_per_wall_second:,.0f}/s), {self.changes} API changes "
            f"({self.changes / self.wall_seconds if self.wall_seconds else 0:,.0f}/s), "
            f"{self.pods} pods and {self.nodes} nodes at the end"
        )


@contextmanager
def quiet_gc() -> Iterator[None]:
    """Build without the cyclic collector, then freeze what was built out of its way.

    Frozen without a collection first: a build leaves next to no garbage, and a pass over
    every object of a big cluster costs about a second (5,000 nodes, 150,000 pods).
    """
    with paused_gc():
        try:
            yield
        finally:
            gc.freeze()


class LineBuffer:
    """Trace lines encoded as ``encode_event`` does, written a few hundred at a time.

    ``orjson.dumps`` of the record is the object's bytes between a fixed prefix and
    suffix, so only the object is encoded; batching saves a buffered write per line.
    """

    def __init__(self, writer: TraceWriter | None, batch: int = 512) -> None:
        self.writer = writer
        self.batch = batch
        self.lines: list[bytes] = []
        self.prefixes = {
            t: f'","type":"{t}","object":'.encode()
            for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR")
        }
        self._second = -1
        self._second_text = b""

    def add(self, observed: float, type_: str, obj: Obj) -> None:
        if self.writer is None:
            return
        # format_time(observed), with the second's text encoded once per second.
        seconds = int(observed)  # virtual time is positive: int() is floor()
        micros = round((observed - seconds) * 1_000_000)
        if micros == 1_000_000:
            seconds, micros = seconds + 1, 0
        if seconds != self._second:
            self._second = seconds
            self._second_text = b'{"observed":"' + format_time(float(seconds))[:19].encode()
        lines = self.lines
        # One join: the object's bytes are copied once, not once per concatenation.
        lines.append(
            b"".join(
                (
                    self._second_text,
                    b".%06dZ" % micros,
                    self.prefixes[type_],
                    orjson.dumps(obj),
                    b"}\n",
                )
            )
        )
        if len(lines) >= self.batch:
            self.flush()

    def flush(self) -> None:
        if self.writer is not None and self.lines:
            self.writer.write_line(b"".join(self.lines))
            self.lines.clear()


def _collect_and_freeze() -> None:
    gc.collect()
    gc.freeze()


def find_scenario(name: str | None, file: str | None) -> Scenario:
    if file:
        from handoff.sim.scenarios.userfile import scenario_from_file

        return scenario_from_file(file)
    if name not in SCENARIOS:
        known = ", ".join(sorted(SCENARIOS))
        raise KeyError(f"unknown scenario {name!r}; known: {known}")
    return SCENARIOS[name]


def source_label(scenario: Scenario, seed: int) -> str:
    return f"simulator:{scenario.name}:seed={seed}"


def pacer(speed: float) -> Callable[[float], None]:
    """Sleep so that virtual time runs ``speed`` times faster than the wall clock."""
    origin: list[float] = []

    def pace(virtual: float) -> None:
        if not origin:
            origin.extend((virtual, time.monotonic()))
            return
        target = origin[1] + (virtual - origin[0]) / speed
        delay = target - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    return pace


def run(
    scenario: Scenario,
    options: Options,
    *,
    record: str | Path | IO[bytes] | None = None,
    speed: float | None = None,
    on_event: Callable[[float, str, Obj], None] | None = None,
    events_group: str = "v1",
    progress: Callable[[str], None] | None = None,
    progress_every: float = 60.0,
    reclaim: bool = True,
) -> tuple[Cluster, RunStats]:
    """Build the scenario, record it, run it for ``options.duration`` (or its default).

    ``reclaim=False`` is for a caller that exits right after: flat out, the cyclic
    collector stays off at the end instead of walking the whole simulated cluster once.
    """
    with quiet_gc():
        cluster = scenario.build(options)
    writer = None
    if record is not None:
        writer = TraceWriter(
            record, cluster=cluster.config.name, source=source_label(scenario, options.seed)
        )
    lines = LineBuffer(writer)
    recording = Recording(cluster.api, _sink(lines, on_event), events_group=events_group)
    recording.start()
    if progress is not None:
        cluster.loop.every(progress_every, _reporter(cluster, scenario, recording, progress))
    duration = options.duration if options.duration is not None else scenario.duration
    started = time.perf_counter()
    with _collector_for_the_run(cluster, speed, reclaim):
        try:
            cluster.loop.run(until=duration, pace=pacer(speed) if speed else None)
        except KeyboardInterrupt:
            pass
        finally:
            # Written before the collector comes back: its first pass walks every object
            # made since the last freeze (seconds on a big run), and a caller about to exit
            # (``reclaim=False``) never needs it.
            try:
                recording.drain()
                lines.flush()
            finally:
                if writer is not None:
                    writer.close()
    wall = time.perf_counter() - started
    api = cluster.api
    stats = RunStats(
        scenario.name,
        options.seed,
        cluster.loop.elapsed,
        wall,
        recording.lines,
        sum(api.counts.values()),
        len(api.stores["pods"].objects),
        len(api.stores["nodes"].objects),
    )
    return cluster, stats


def _sink(lines: LineBuffer, on_event: Callable[[float, str, Obj], None] | None) -> Callable:
    """Where the recording's watch events go: the trace, and the caller's hook if any."""
    if on_event is None:
        return lines.add

    def sink(observed: float, type_: str, obj: Obj) -> None:
        lines.add(observed, type_, obj)
        on_event(observed, type_, obj)

    return sink


def _reporter(
    cluster: Cluster, scenario: Scenario, recording: Recording, progress: Callable[[str], None]
) -> Callable[[], None]:
    def report() -> None:
        api = cluster.api
        progress(
            f"{format_time(cluster.now)[:19]}Z {scenario.name}: "
            f"{len(api.stores['pods'].objects)} pods, {len(api.nodes())} nodes, "
            f"{recording.lines} watch events so far"
        )

    return report


@contextmanager
def _collector_for_the_run(cluster: Cluster, speed: float | None, reclaim: bool) -> Iterator[None]:
    """The simulation allocates many short-lived, acyclic dicts; collecting every 700
    allocations costs a fifth of the run. Objects from the build are frozen out of it.
    Flat out, the collector is paused (it finds a few hundred cyclic objects a virtual
    minute, and its passes over the live pods cost a tenth of the run); one pass every ten
    virtual minutes, whose survivors are then frozen, keeps endless runs bounded."""
    previous = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    was_enabled = gc.isenabled()
    if not speed:
        gc.disable()
        cluster.loop.every(600.0, _collect_and_freeze)
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        if was_enabled and reclaim:
            gc.enable()


def run_lead(cluster: Cluster, scenario: Scenario) -> None:
    """Run the scenario's ``lead`` (its past when served) flat out; the caller set the
    virtual start that much before the wall clock's now, so it ends at now."""
    if scenario.lead:
        cluster.loop.run(until=scenario.lead)


def serve(
    scenario: Scenario,
    options: Options,
    address: str,
    *,
    speed: float = 1.0,
    kubeconfig: str | Path | None = None,
    record: str | Path | None = None,
    events_group: str = "v1",
    faults: list[Fault] | None = None,
    paused: bool = False,
) -> tuple[SimServer, Recording, TraceWriter | None]:
    """Build the scenario and serve it over HTTP; the caller stops it with ``server.stop()``.

    ``faults`` are armed before the first request (see ``handoff.sim.serve.faults``); ``paused``
    holds virtual time at 0 (or the end of the scenario's lead) until ``server.resume()``
    (or ``POST /_sim/clock``). The recording (and ``record``) starts once the lead has run,
    with a list, as a watcher's would."""
    from handoff.sim.serve.server import SimServer

    host, _, port = address.rpartition(":")
    with quiet_gc():
        cluster = scenario.build(options)
    writer = None
    if record is not None:
        writer = TraceWriter(
            record, cluster=cluster.config.name, source=source_label(scenario, options.seed)
        )

    def sink(observed: float, type_: str, obj: Obj) -> None:
        if writer is not None:
            writer.write(format_time(observed), type_, obj)

    recording = Recording(cluster.api, sink, events_group=events_group)
    run_lead(cluster, scenario)
    recording.start()
    server = SimServer(
        cluster,
        host or "127.0.0.1",
        int(port or 0),
        speed=speed,
        duration=options.duration,
        paused=paused,
    )
    if faults:
        server.faults.arm(faults)
    if kubeconfig is not None:
        server.write_kubeconfig(kubeconfig)
    server.start()
    return server, recording, writer
