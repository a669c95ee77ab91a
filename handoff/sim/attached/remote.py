"""What the attached simulator needs from a real API server: the verbs its components use on
their own API server, and the watch changes for its nodes, drained in the loop's thread."""

from __future__ import annotations

from typing import Any, Protocol

from handoff.sim.objects import Obj

# A watch change: (resource, type, object) with type ADDED, MODIFIED or DELETED.
Change = tuple[str, str, Obj]


class Remote(Protocol):
    """A real API server. Errors are raised as ``ApiError`` with the server's code and
    reason, as the simulator's own API server raises them."""

    def create(self, resource: str, obj: Obj) -> Obj:
        """POST to the object's collection; the stored object."""
        ...

    def patch(
        self, resource: str, namespace: str, name: str, patch: Obj, subresource: str = ""
    ) -> Obj:
        """A JSON merge patch (RFC 7386) of the object or of its subresource."""
        ...

    def delete(
        self, resource: str, namespace: str, name: str, grace: int | None, uid: str | None
    ) -> Obj | None:
        """DELETE with a grace period (None: the object's own) and a UID precondition."""
        ...

    def renew_lease(self, node: str, now: float) -> None:
        """The node's Lease in kube-node-lease, renewed at ``now`` (created if missing)."""
        ...

    def watch_node(self, node: str) -> None:
        """From now on, report the Node and the pods bound to it (fieldSelector
        spec.nodeName) as changes."""
        ...

    def changes(self) -> list[Change]:
        """The watch changes that arrived since the last call, in arrival order."""
        ...


def merge_diff(old: Any, new: Any) -> Any:
    """The JSON merge patch that turns ``old`` into ``new``: changed keys, removed keys as
    null, lists whole. ``{}`` when they are equal."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            inner = merge_diff(old[key], value)
            if inner != {} or not isinstance(value, dict):
                patch[key] = inner
    for key in old:
        if key not in new:
            patch[key] = None
    return patch
