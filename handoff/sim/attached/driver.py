"""Pacing an attached cluster: virtual time follows the wall clock (speed 1: the real
control plane's timers cannot be sped up), and between steps the real API server's watch
changes are taken into the mirror, all in one thread."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from handoff.sim.attached.mirror import MirrorAPI
from handoff.sim.clock import Loop

STEP_S = 0.02
NODE_FAULTS = ("hang", "stop", "die", "resume", "not-ready", "memory-pressure", "delete")


@dataclass(frozen=True)
class NodeFault:
    """``NODE:MODE@SECONDS``: at that virtual second, do MODE to the node (``hang``: the
    kubelet is silent but heartbeats; ``stop``: no heartbeats either; ``delete``: the Node
    object is deleted; ``die``, ``resume``, ``not-ready``, ``memory-pressure``)."""

    node: str
    mode: str
    at: float

    @staticmethod
    def parse(text: str) -> NodeFault:
        node, sep, rest = text.partition(":")
        mode, at_sep, seconds = rest.partition("@")
        if not (node and sep and mode):
            raise ValueError(
                f"{text!r}: a node fault is NODE:MODE[@SECONDS], e.g. worker-2:stop@30"
            )
        if mode not in NODE_FAULTS:
            raise ValueError(f"{text!r}: the mode must be one of {', '.join(NODE_FAULTS)}")
        try:
            at = float(seconds) if at_sep else 0.0
        except ValueError:
            raise ValueError(f"{text!r}: {seconds!r} is not a number of seconds") from None
        if at < 0:
            raise ValueError(f"{text!r}: the time cannot be negative")
        return NodeFault(node, mode, at)


Inbox = queue.SimpleQueue[tuple[Callable[..., object], tuple[object, ...]]]


def drive(
    loop: Loop,
    api: MirrorAPI,
    stop: threading.Event,
    duration: float | None,
    inbox: Inbox | None = None,
) -> None:
    """Run until ``stop`` or ``duration`` virtual seconds: take in the watches' changes and
    the calls other threads posted (``inbox``: a fault, a scenario step), then run what is
    due by the wall clock. Everything touching the cluster runs in this one thread.

    Virtual time is the wall clock's (the loop started at the epoch second it was built), so
    the timestamps the kubelets write agree with the real control plane's."""
    while not stop.is_set():
        api.pull()
        while inbox is not None and not inbox.empty():
            fn, args = inbox.get_nowait()
            fn(*args)
        target = time.time() - loop.start
        if duration is not None:
            target = min(target, duration)
        loop.run(until=target)
        if duration is not None and loop.elapsed >= duration:
            return
        stop.wait(STEP_S)
