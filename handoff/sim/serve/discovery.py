"""What the served simulator says about itself: version, API groups, resources, OpenAPI.

Enough for the official Python client and kubectl: `/version`, `/api`, `/apis`, one
APIResourceList per group version, and a minimal OpenAPI v3 so `kubectl apply` sees that
pods and Deployments accept server-side field validation.
"""

from __future__ import annotations

from typing import Any

from handoff.core.resources import EVENTS_GROUP, KIND_OF
from handoff.sim.objects import Obj

VERSION = {
    "major": "1",
    "minor": "33",
    "gitVersion": "v1.33.1-handoff-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.24.3",
    "compiler": "gc",
    "platform": "linux/amd64",
}
TABLE = "as=Table"
READ = ["get", "list", "watch"]
UPDATE = ["get", "list", "patch", "update", "watch"]


def _resource(name: str, namespaced: bool, verbs: list[str], short: list[str], **extra: Any) -> Obj:
    return {
        "name": name,
        "singularName": KIND_OF[name].lower(),
        "namespaced": namespaced,
        "kind": KIND_OF[name],
        "verbs": verbs,
        "shortNames": short,
        **extra,
    }


RESOURCES: dict[str, list[Obj]] = {
    "v1": [
        _resource("pods", True, ["create", "delete", *UPDATE], ["po"], categories=["all"]),
        _resource("nodes", False, UPDATE, ["no"]),
        _resource("events", True, READ, ["ev"]),
    ],
    EVENTS_GROUP: [_resource("events", True, READ, ["ev"])],
    "apps/v1": [
        _resource(
            "deployments", True, ["create", "delete", *UPDATE], ["deploy"], categories=["all"]
        ),
        _resource("replicasets", True, READ, ["rs"], categories=["all"]),
    ],
    "batch/v1": [_resource("jobs", True, ["delete", *READ], [], categories=["all"])],
}

SUBRESOURCES = ("deployments/scale",)

_VALIDATION = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]


def _openapi(prefix: str, plural: str, gvk: Obj) -> Obj:
    """POST and PATCH of one namespaced kind, with the fieldValidation parameter."""

    def op(action: str) -> Obj:
        return {
            "parameters": _VALIDATION,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        }

    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.1"},
        "paths": {
            f"{prefix}/namespaces/{{namespace}}/{plural}": {"post": op("post")},
            f"{prefix}/namespaces/{{namespace}}/{plural}/{{name}}": {"patch": op("patch")},
        },
        "components": {"schemas": {}},
    }


OPENAPI = {
    "api/v1": _openapi("/api/v1", "pods", {"group": "", "version": "v1", "kind": "Pod"}),
    "apis/apps/v1": _openapi(
        "/apis/apps/v1", "deployments", {"group": "apps", "version": "v1", "kind": "Deployment"}
    ),
}


def discovery(address: str) -> dict[str, Obj | None]:
    """Fixed answers by path; ``None`` means a plain ``ok`` (health endpoints)."""
    groups = [g for g in RESOURCES if g != "v1"]
    fixed: dict[str, Obj | None] = {
        "/version": VERSION,
        "/api": {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": address.split("//")[1]}
            ],
        },
        "/apis": {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(g) for g in groups],
        },
        "/api/v1": {"kind": "APIResourceList", "groupVersion": "v1", "resources": RESOURCES["v1"]},
        "/healthz": None,
        "/readyz": None,
        "/livez": None,
        "/openapi/v3": {
            "paths": {
                path: {"serverRelativeURL": f"/openapi/v3/{path}?hash=sim"} for path in OPENAPI
            }
        },
    }
    for group in groups:
        fixed[f"/apis/{group.split('/')[0]}"] = {
            "kind": "APIGroup",
            "apiVersion": "v1",
            **_group(group),
        }
        fixed[f"/apis/{group}"] = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group,
            "resources": RESOURCES[group],
        }
    for path, document in OPENAPI.items():
        fixed[f"/openapi/v3/{path}"] = document
    return fixed


def _group(group_version: str) -> Obj:
    name, version = group_version.split("/")
    gv = {"groupVersion": group_version, "version": version}
    return {"name": name, "versions": [gv], "preferredVersion": gv}
