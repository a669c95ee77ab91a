"""The faults' cluster and what their tests read (tests/k8s/test_faults.py: the API
server's faults; tests/k8s/test_credential_faults.py: the kubeconfig's).

The cluster reads as its own service account, bound to deploy/rbac.yaml's ClusterRole,
so revoking its token touches no other test. It is registered once for the k8s tests (the
``faults`` fixture, tests/k8s/conftest.py): the API server's faults run before the
situations are staged, the kubeconfig's while the controllers' clocks run for them.
"""

from __future__ import annotations

import base64
import io
import secrets
import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from django.core.management import CommandError, call_command
from django.test import override_settings
from kubernetes import client as k8s

from devtools import controlplane
from devtools.controlplane import ControlPlane
from handoff.live import store
from tests.k8s.situations import pod
from tests.k8s.stack import Stack, offline_triage, wait_for

CLUSTER = "faulty"
NAMESPACE = "faults"
ACCOUNT = ("handoff", "handoff-faults")
UNSCHEDULABLE = {"nodeSelector": {"disktype": "none-such"}}
COMPACTING = ["--etcd-compaction-interval=3s", "--watch-cache-sizes=pods#0"]


@dataclass
class Faults:
    stack: Stack
    plane: ControlPlane
    core: k8s.CoreV1Api
    kubeconfig: Path
    tmp: Path
    log_from: int  # the worker log's size when the cluster was added
    token: str = ""  # the one in the kubeconfig

    def write_kubeconfig(self, ca: Path | None = None, token: str | None = None) -> None:
        """The cluster's kubeconfig, with ``token`` (default: the account's first) and
        ``ca`` (default: the cluster's)."""
        if token is None:
            token = controlplane.service_account_token(self.core.api_client, *ACCOUNT)
        self.token = token
        self.plane.write_kubeconfig(self.kubeconfig, ACCOUNT[1], token, ca=ca)

    def issue_token(self) -> str:
        """A new token for the account, as an admin makes one: a token Secret the token
        controller fills in. (Waiting for the controller to replace a deleted one is not
        safe at v1.20.2: a deletion its informer learns by relisting, e.g. just after an
        API server restart, is dropped, and no new token ever comes.)"""
        namespace, account = ACCOUNT
        name = f"{account}-token-{secrets.token_hex(3)}"
        annotations = {"kubernetes.io/service-account.name": account}
        self.core.create_namespaced_secret(
            namespace,
            {
                "metadata": {"name": name, "annotations": annotations},
                "type": "kubernetes.io/service-account-token",
            },
        )
        filled = wait_for(
            lambda: self.core.read_namespaced_secret(name, namespace).data or {},
            lambda data: "token" in data,
            30,
            "the token controller to fill the new token in",
        )
        return base64.b64decode(filled["token"]).decode()

    def create(self, name: str) -> None:
        self.core.create_namespaced_pod(NAMESPACE, pod(name, UNSCHEDULABLE))

    def delete(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, NAMESPACE)


def register(stack: Stack, plane: ControlPlane, admin: k8s.ApiClient, tmp: Path) -> Faults:
    """The account, its binding to deploy/rbac.yaml's ClusterRole (already applied) and
    the namespace made, the cluster added. It stays until the stack goes."""
    core = k8s.CoreV1Api(admin)
    namespace, name = ACCOUNT
    core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    k8s.RbacAuthorizationV1Api(admin).create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "handoff-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        }
    )
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    run = Faults(stack, plane, core, tmp / "faulty.kubeconfig", tmp, 0)
    run.write_kubeconfig()
    controlplane.wait_default_account(core, NAMESPACE)
    run.log_from = len(stack.worker_log())
    stack.add_cluster(CLUSTER, run.kubeconfig)
    return run


def failing(stack: Stack) -> list[str]:
    """The cluster's lines of /healthz's ``failing``."""
    _, body = stack.get("/healthz")
    return [line for line in body.get("failing", []) if line.startswith(f"{CLUSTER}/")]


def status(stack: Stack) -> tuple[int, list[str]]:
    """``manage.py status`` (in-process, on the stack's Redis): the exit code it would give
    (its CommandError is exit 1) and its FAILING lines for the cluster."""
    out = io.StringIO()
    code = 0
    with override_settings(REDIS_URL=stack.redis_url):
        try:
            call_command("status", stdout=out)
        except CommandError:
            code = 1
    lines = [line for line in out.getvalue().splitlines() if line.startswith(f"FAILING {CLUSTER}/")]
    return code, lines


def health_word(stack: Stack) -> str:
    _, body = stack.get("/api/clusters")
    return next(c["health"] for c in body["clusters"] if c["name"] == CLUSTER)


def views(stack: Stack) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in stack.pods(CLUSTER, NAMESPACE)}


def verdicts(stack: Stack) -> dict[str, str]:
    return {name: view["verdict"] for name, view in views(stack).items()}


def watching_since(stack: Stack, since: float) -> bool:
    """Every watch has a version, no failure pending, and heard the server after ``since``."""
    with stack.client() as client:
        states = [store.stream_state(client, CLUSTER, r) for r in ("pods", "nodes", "events")]
    return all(
        s.get("rv") and s.get("failures", "0") == "0" and float(s.get("seen") or 0) > since
        for s in states
    )


def assert_outage_reported(stack: Stack, words: str) -> list[str]:
    """/healthz, status and the cluster list all say so, one line naming the cluster."""
    lines = wait_for(
        lambda: failing(stack),
        lambda found: any(words in line for line in found),
        90,
        f"/healthz to report {words!r}",
    )
    assert all("\n" not in line for line in lines)
    code, printed = status(stack)
    assert code == 1
    assert any(words in line for line in printed), printed
    assert health_word(stack) != "ok"
    return lines


def assert_recovered(run: Faults) -> None:
    wait_for(lambda: failing(run.stack), lambda found: found == [], 90, "/healthz to recover")
    assert status(run.stack)[0] == 0


def assert_no_tracebacks(run: Faults) -> None:
    log = run.stack.worker_log()[run.log_from :]
    assert "Traceback" not in log
    assert "raised unexpected" not in log


def assert_offline_agrees(run: Faults, label: str) -> None:
    _, body = run.stack.get(f"/api/clusters/{CLUSTER}/pods?namespace={NAMESPACE}")
    live = {v["name"]: (v["verdict"], v["reason"]) for v in body["pods"]}
    offline = offline_triage(run.stack, CLUSTER, run.tmp / f"{label}.jsonl", body["evaluated_at"])
    assert {
        p["name"]: (p["verdict"], p["reason"]) for p in offline if p["namespace"] == NAMESPACE
    } == live


def expired(plane: ControlPlane, version: str) -> bool:
    """Whether a watch of pods from ``version`` answers 410 (etcd compacted past it)."""
    url = f"{plane.server}/api/v1/pods?watch=1&resourceVersion={version}&timeoutSeconds=1"
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {plane.admin_token()}"}
    )
    context = ssl.create_default_context(cafile=str(plane.ca))
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        return any(
            orjson.loads(line).get("object", {}).get("code") == 410
            for line in answer
            if line.strip()
        )
