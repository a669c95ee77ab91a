"""Scrub Kubernetes objects before anything stores them.

Handoff reads status, conditions, events and a few labels; it never needs container
environment values, the client-side apply copy of a manifest, tokens or managedFields.
Every object a source hands to the store passes through ``scrub`` first, so secrets never
reach Redis, recordings or logs, whatever the fold would have read.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# Annotation names that tend to hold credentials (tokens, passwords, keys, certificates).
SECRET_ANNOTATION = re.compile(
    r"token|secret|password|passwd|credential|private[-_.]?key|api[-_.]?key|auth|\.cert|cert$",
    re.IGNORECASE,
)
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def scrub(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without secrets; mutated in place and returned (callers own it)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        _scrub_metadata(meta)
    spec = obj.get("spec")
    if isinstance(spec, dict):
        for key in CONTAINER_LISTS:
            containers = spec.get(key)
            if isinstance(containers, list):
                for container in containers:
                    if isinstance(container, dict):
                        _scrub_container(container)
    return obj


def _scrub_metadata(meta: dict[str, Any]) -> None:
    meta.pop("managedFields", None)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        for name in [n for n in annotations if n == LAST_APPLIED or SECRET_ANNOTATION.search(n)]:
            del annotations[name]


def _scrub_container(container: dict[str, Any]) -> None:
    env = container.get("env")
    if isinstance(env, list):
        container["env"] = [_scrub_env(item) for item in env if isinstance(item, dict)]
    env_from = container.get("envFrom")
    if isinstance(env_from, list):
        container["envFrom"] = [
            _env_from_names(item) for item in env_from if isinstance(item, dict)
        ]
    # Arguments and commands carry passwords too often to keep (`--password=...`).
    for key in ("args", "command"):
        if key in container:
            container[key] = [REDACTED]


def _scrub_env(item: dict[str, Any]) -> dict[str, Any]:
    # The variable's name says what a container expects; its value is nobody's business.
    scrubbed: dict[str, Any] = {"name": item.get("name", "")}
    if "value" in item or "valueFrom" in item:
        scrubbed["value"] = REDACTED
    return scrubbed


def _env_from_names(item: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key in ("configMapRef", "secretRef"):
        ref = item.get(key)
        if isinstance(ref, dict):
            kept[key] = {"name": ref.get("name", "")}
    if "prefix" in item:
        kept["prefix"] = item["prefix"]
    return kept
