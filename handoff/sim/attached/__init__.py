"""The simulator's nodes and kubelets attached to a real API server (``simulate --attach``).

The kubelets talk to a ``MirrorAPI``: the same verbs as the simulator's own API server, whose
objects are copies of the real ones (the pods bound to the simulated nodes, the nodes
themselves, the events the kubelets write). Writes go to the real API server first, through
a ``Remote`` (``handoff/attach`` implements it over HTTP with the kubeconfig's TLS and
token); its answers and the real watch streams come back into the mirror, in the loop's
thread. Scheduling, binding, PodGC, node lifecycle, eviction and the workload controllers
are the real control plane's.
"""

from handoff.sim.attached.mirror import MirrorAPI
from handoff.sim.attached.remote import Remote, merge_diff
from handoff.sim.attached.workloads import RemoteDeployments, RemoteJobs

__all__ = ["MirrorAPI", "Remote", "RemoteDeployments", "RemoteJobs", "merge_diff"]
