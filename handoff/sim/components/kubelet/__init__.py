"""The kubelet of one node: pod watch, admission, pod workers, status manager, heartbeats,
eviction, static pods and their mirror pods, one module per manager."""

from handoff.sim.components.kubelet.kubelet import Kubelet
from handoff.sim.components.kubelet.state import Behaviour, KubeletTimings, PodState

__all__ = ["Behaviour", "Kubelet", "KubeletTimings", "PodState"]
