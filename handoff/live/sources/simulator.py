"""The simulator in-process: a scenario run inside the worker, paced at wall-clock speed,
its recording watcher writing straight into the cluster's stream.

A simulation cannot be handed from one process to another, so this source is one task for
the run's whole length. When a worker dies, the successor starts a fresh run (another
seed): the objects of the lost run are recorded as deleted while blind, exactly as after a
410, so the board does not keep pods that no longer exist.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from handoff.core.resources import KIND_OF, RESOURCE_OF
from handoff.live import clusters, store
from handoff.live.sources.sink import StreamSink
from handoff.live.sources.watching import RECONCILED, bury_vanished
from handoff.sim import Options, find_scenario
from handoff.sim.runner import run


class _Vanished:
    """The lost run's objects, reconciled as if relisted empty."""

    def api_version(self, resource: str) -> tuple[str, str]:
        return "v1", KIND_OF[resource]


def run_simulation(
    sink: StreamSink,
    config: clusters.ClusterConfig,
    stop: threading.Event,
    speed: float = 1.0,
) -> None:
    """Run the cluster's scenario from now until it ends or ``stop`` is set."""
    now = sink.clock()
    last = sink.state().get("last_event")
    for resource in RECONCILED:
        resource_sink = StreamSink(sink.client, sink.cluster, resource, maxlen=sink.maxlen)
        if last and sink.client.exists(store.known_key(sink.cluster, resource)):
            blind = resource_sink.blind(min(float(last), now), now)
            bury_vanished(_Vanished(), resource_sink, resource, [], blind, now)
        resource_sink.forget_known()
    scenario = find_scenario(config.scenario, None)
    runs = int(sink.client.hincrby(store.stream_key(sink.cluster, "simulator"), "runs", 1))
    options = Options(
        seed=int(config.options.get("seed", 0)) + runs - 1, start=float(int(time.time()))
    )
    known = {resource: StreamSink(sink.client, sink.cluster, resource) for resource in RECONCILED}

    def on_event(observed: float, type_: str, obj: dict[str, Any]) -> None:
        if stop.is_set():
            raise KeyboardInterrupt  # the runner stops cleanly on it
        if type_ == "BOOKMARK":
            return
        sink.write([(type_, obj)], observed=observed)
        resource = RESOURCE_OF.get(obj.get("kind", ""))
        if resource in known and type_ in ("ADDED", "MODIFIED", "DELETED"):
            pipe = sink.client.pipeline(transaction=False)
            store.remember(pipe, sink.cluster, resource, type_, obj)
            pipe.execute()

    run(scenario, options, speed=speed, on_event=on_event)
