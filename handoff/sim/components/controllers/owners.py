"""What the workload controllers share: an owning object kept in memory (``Owner``), writing
its spec and status subresource as the real controllers do, and the pod predicates they
count with (active, ready, owned)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import orjson

from handoff.core.resources import RESOURCE_OF
from handoff.sim.components.apiserver import ALPHABET, APIServer
from handoff.sim.objects import Obj


def write_spec(api: APIServer, owner: Owner, spec: Obj) -> None:
    """Write a changed spec (a new generation), keeping what else is stored."""
    current = api.find(owner.resource, owner.namespace, owner.name)
    if current is None or current["metadata"]["uid"] != owner.uid or current["spec"] == spec:
        return
    meta = dict(current["metadata"])
    meta["generation"] = meta.get("generation", 1) + 1
    owner.obj = api.update(owner.resource, {**current, "metadata": meta, "spec": spec})


def write_status(api: APIServer, owner: Owner, status: Obj) -> None:
    """The status subresource: written only when it changed."""
    current = api.find(owner.resource, owner.namespace, owner.name)
    if current is None or current["metadata"]["uid"] != owner.uid or current["status"] == status:
        return
    owner.obj = api.update(owner.resource, {**current, "status": status})


def delete_object(api: APIServer, owner: Owner) -> None:
    current = api.find(owner.resource, owner.namespace, owner.name)
    if current is not None and current["metadata"]["uid"] == owner.uid:
        api.delete(owner.resource, owner.namespace, owner.name)


def template_hash(template: Obj) -> str:
    """pod-template-hash: a short, stable string from the template (alphabet of SafeEncode)."""
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()
    return "".join(ALPHABET[b % len(ALPHABET)] for b in digest[:10])


@dataclass
class Owner:
    """An owning object kept in memory: enough to build ownerReferences and events."""

    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str
    template: Obj
    replicas: int = 1
    labels: dict[str, str] = field(default_factory=dict)
    pods: dict[str, Obj] = field(default_factory=dict)
    obj: Obj | None = None  # the API object, as last written

    @property
    def resource(self) -> str:
        return RESOURCE_OF[self.kind]

    def as_obj(self) -> Obj:
        if self.obj is not None:
            return self.obj
        return {
            "kind": self.kind,
            "apiVersion": self.api_version,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": "1",
            },
        }

    def owner_ref(self) -> Obj:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def is_owned(pod: Obj) -> bool:
    return bool(pod["metadata"].get("ownerReferences"))


def is_active(pod: Obj) -> bool:
    return pod["status"].get("phase") not in ("Succeeded", "Failed") and not pod["metadata"].get(
        "deletionTimestamp"
    )


def is_ready(pod: Obj) -> bool:
    for cond in pod["status"].get("conditions") or ():
        if cond["type"] == "Ready":
            return cond["status"] == "True"
    return False
