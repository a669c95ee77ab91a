"""Faults of the kubeconfig Handoff reads the real API server with, watched through the
user's path: each ends with nothing lost and the verdicts a fault-free run gives; while it
lasts, ``/healthz`` and ``manage.py status`` name the cluster in one line, with no
traceback in the worker.

- the reader's token revoked (its Secret deleted), then a new one put in the kubeconfig;
- a kubeconfig whose CA did not sign the server's certificate, then fixed.

They touch only the faults' cluster (its own service account and kubeconfig,
tests/k8s/faults.py), so they run while the controllers' clocks run for the staged
situations (tests/k8s/conftest.py's ORDER).
"""

from __future__ import annotations

from devtools import controlplane
from tests.k8s.faults import (
    ACCOUNT,
    Faults,
    assert_no_tracebacks,
    assert_offline_agrees,
    assert_outage_reported,
    assert_recovered,
    verdicts,
)
from tests.k8s.stack import wait_for


def test_a_revoked_token_is_one_line_and_a_new_one_recovers(faults: Faults) -> None:
    stack, core = faults.stack, faults.core
    namespace, name = ACCOUNT
    for secret in core.read_namespaced_service_account(name, namespace).secrets or ():
        core.delete_namespaced_secret(secret.name, namespace)  # the token is revoked
    assert_outage_reported(stack, "HTTP 401 Unauthorized")
    faults.create("while-revoked")
    faults.write_kubeconfig(token=faults.issue_token())  # the operator puts a new token in
    assert_recovered(faults)
    wait_for(lambda: verdicts(stack), lambda v: "while-revoked" in v, 60, "the pod made meanwhile")
    assert_offline_agrees(faults, "revoked")
    assert_no_tracebacks(faults)


def test_a_wrong_ca_is_one_line_and_fixing_it_recovers(faults: Faults) -> None:
    stack = faults.stack
    other = controlplane.make_ca(faults.tmp, "other", "not-the-cluster-ca")
    faults.write_kubeconfig(ca=other, token=faults.token)  # read at the next window (15 s)
    assert_outage_reported(stack, "certificate verify failed")
    faults.create("while-untrusted")
    faults.write_kubeconfig(token=faults.token)
    assert_recovered(faults)
    wait_for(
        lambda: verdicts(stack), lambda v: "while-untrusted" in v, 60, "the pod made meanwhile"
    )
    assert_offline_agrees(faults, "wrong-ca")
    assert_no_tracebacks(faults)
