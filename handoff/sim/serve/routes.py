"""Request paths of the Kubernetes API, as the simulator serves them."""

from __future__ import annotations

from dataclasses import dataclass

from handoff.sim.serve.discovery import RESOURCES, SUBRESOURCES


@dataclass
class Route:
    group: str  # "v1" or "events.k8s.io/v1"
    resource: str
    namespace: str | None
    name: str | None
    watch_path: bool = False
    subresource: str | None = None  # "scale" of a Deployment


def parse_path(path: str) -> Route | None:
    """/api/v1/[watch/][namespaces/NS/]RESOURCE[/NAME] and /apis/GROUP/VERSION/..."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "v1", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis" and f"{parts[1]}/{parts[2]}" in RESOURCES:
        group, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return None
    watch_path = bool(rest) and rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
    namespace = None
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    subresource = None
    if len(rest) == 3 and f"{rest[0]}/{rest[2]}" in SUBRESOURCES and not watch_path:
        subresource, rest = rest[2], rest[:2]
    if not rest or len(rest) > 2:
        return None
    resource = rest[0]
    if resource not in {r["name"] for r in RESOURCES[group]}:
        return None
    name = rest[1] if len(rest) == 2 else None
    return Route(group, resource, namespace, name, watch_path, subresource)
