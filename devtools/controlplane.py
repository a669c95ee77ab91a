"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-scheduler and
kube-controller-manager (v1.20.2, see devtools/kubeassets.py), for the ``k8s`` tests.

No kubelets: Nodes are plain API objects whose Leases someone else renews. The API server
serves TLS from a CA made here, authenticates bearer tokens (an ``admin`` in
``system:masters``; service-account tokens signed with a key made here) and authorizes
with Node,RBAC. ``grant_reader`` applies deploy/rbac.yaml and writes a kubeconfig for its
service account, the only identity Handoff's watchers get.

Everything lives in one folder: certificates, tokens, kubeconfigs, etcd's data, one log
per component. The controller manager runs with its defaults (node monitor period 5 s,
grace period 40 s, PodGC every 20 s with a 40 s quarantine) so what the tests see is what
a v1.20 cluster does.
"""

from __future__ import annotations

import base64
import secrets
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import utils as k8s_utils

from devtools.devstack import die_with_parent, free_port

# Seconds for kube-apiserver to answer /readyz: 8 s seen on a lightly loaded machine, 45 s on a
# loaded one (2 cores shared with other test runs).
START_TIMEOUT = 120.0
# On SIGTERM kube-apiserver stops listening at once, then goes on serving the watches it
# has open until they end (v1.20: up to its 60 s shutdown timeout, the controllers' watches
# last minutes): what is still open 2 s after the signal is cut with a SIGKILL, as a
# supervisor whose grace period ran out would. New connections are refused from the signal
# on either way.
APISERVER_DRAIN_S = 2.0
ADMIN = "admin"


@dataclass
class ControlPlane:
    """A started control plane: its folder, ports, binaries and processes."""

    directory: Path
    binaries: dict[str, Path]
    port: int
    etcd_port: int
    apiserver_args: list[str] = field(default_factory=list)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    version: str = ""

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca(self) -> Path:
        return self.directory / "pki" / "ca.crt"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.directory / "admin.kubeconfig"

    def admin_token(self) -> str:
        return (self.directory / "tokens.csv").read_text().split(",", 1)[0]

    def log(self, component: str) -> Path:
        return self.directory / f"{component}.log"

    def write_kubeconfig(self, path: Path, user: str, token: str, ca: Path | None = None) -> Path:
        """A kubeconfig for ``user`` with ``token``, trusting ``ca`` (default: ours)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "k8s",
                    "cluster": {"server": self.server, "certificate-authority": str(ca or self.ca)},
                }
            ],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": user, "context": {"cluster": "k8s", "user": user}}],
            "current-context": user,
        }
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path

    # ------------------------------------------------------------ processes

    def start_apiserver(self, extra_args: Sequence[str] | None = None) -> None:
        """Start kube-apiserver (with ``extra_args`` instead of the ones it was started
        with, when given) and wait until /readyz answers ok."""
        if extra_args is not None:
            self.apiserver_args = list(extra_args)
        self.procs["apiserver"] = self._spawn("apiserver", self._apiserver_argv())
        self.wait_ready()

    def stop_apiserver(self) -> None:
        _stop(self.procs.pop("apiserver"), APISERVER_DRAIN_S)

    def restart_apiserver(self, down: float = 5.0, extra_args: Sequence[str] | None = None) -> None:
        """Kill kube-apiserver, leave it down for ``down`` seconds, start it again."""
        self.stop_apiserver()
        time.sleep(down)
        self.start_apiserver(extra_args)

    def stop(self) -> None:
        for name in ("controller-manager", "scheduler", "apiserver", "etcd"):
            proc = self.procs.pop(name, None)
            if proc is not None:
                _stop(proc, APISERVER_DRAIN_S if name == "apiserver" else 10.0)

    def ready(self) -> bool:
        """Whether /readyz answers 200 over TLS verified against the CA."""
        request = urllib.request.Request(
            f"{self.server}/readyz", headers={"Authorization": f"Bearer {self.admin_token()}"}
        )
        context = ssl.create_default_context(cafile=str(self.ca))
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                return answer.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            proc = self.procs.get("apiserver")
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(
                    f"kube-apiserver exited ({proc.returncode}): see {self.log('apiserver')}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"kube-apiserver not ready after {timeout:.0f}s: see {self.log('apiserver')}"
                )
            time.sleep(0.2)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        with open(self.log(name), "ab") as out:
            return subprocess.Popen(
                argv,
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )

    def _apiserver_argv(self) -> list[str]:
        d = self.directory
        return [
            str(self.binaries["kube-apiserver"]),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}",
            "--insecure-port=0",
            f"--tls-cert-file={d / 'pki' / 'apiserver.crt'}",
            f"--tls-private-key-file={d / 'pki' / 'apiserver.key'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-key-file={d / 'pki' / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'pki' / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--service-cluster-ip-range=10.96.0.0/16",
            *self.apiserver_args,
        ]

    def _start_etcd(self) -> None:
        peer = free_port()
        url, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        argv = [str(self.binaries["etcd"]), f"--data-dir={self.directory / 'etcd'}", "--name=cp"]
        argv += [f"--listen-client-urls={url}", f"--advertise-client-urls={url}"]
        argv += [f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}"]
        argv += [f"--initial-cluster=cp={peer_url}"]
        self.procs["etcd"] = self._spawn("etcd", argv)

    def _start_controllers(self) -> None:
        kubeconfig = f"--kubeconfig={self.admin_kubeconfig}"
        common = [kubeconfig, "--leader-elect=false", "--port=0", "--secure-port=0"]
        self.procs["scheduler"] = self._spawn(
            "scheduler", [str(self.binaries["kube-scheduler"]), *common]
        )
        manager = [str(self.binaries["kube-controller-manager"]), *common, "--controllers=*"]
        manager += ["--use-service-account-credentials=false"]
        manager += [f"--service-account-private-key-file={self.directory / 'pki' / 'sa.key'}"]
        manager += [f"--root-ca-file={self.ca}"]
        self.procs["controller-manager"] = self._spawn("controller-manager", manager)


def start(
    directory: Path,
    binaries: dict[str, Path],
    apiserver_args: Sequence[str] = (),
    audited_users: Sequence[str] = (),
) -> ControlPlane:
    """Start etcd, kube-apiserver (ready), kube-scheduler and kube-controller-manager, and
    return once the namespace ``default`` can take pods: its ``default`` account made by the
    controller manager's serviceaccount controller, without which the ServiceAccount
    admission plugin refuses a pod (v1.20: 'error looking up service account
    default/default'). The requests of ``audited_users`` go to ``audit.log`` (JSON lines,
    Metadata level)."""
    directory.mkdir(parents=True, exist_ok=True)
    if audited_users:
        apiserver_args = [*audit_args(directory, audited_users), *apiserver_args]
    make_pki(directory / "pki")
    (directory / "tokens.csv").write_text(
        f"{secrets.token_hex(16)},{ADMIN},{ADMIN},system:masters\n"
    )
    (directory / "tokens.csv").chmod(0o600)
    plane = ControlPlane(directory, binaries, free_port(), free_port(), list(apiserver_args))
    plane.version = component_version(binaries["kube-apiserver"])
    try:
        plane._start_etcd()
        plane.write_kubeconfig(plane.admin_kubeconfig, ADMIN, plane.admin_token())
        plane.start_apiserver()
        plane._start_controllers()
        with admin_client(plane) as api:
            wait_default_account(k8s.CoreV1Api(api), "default", START_TIMEOUT)
    except BaseException:
        plane.stop()
        raise
    return plane


def has_default_account(core: k8s.CoreV1Api, namespace: str) -> bool:
    """Whether ``namespace``'s ``default`` service account exists yet."""
    try:
        core.read_namespaced_service_account("default", namespace)
    except k8s.ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def wait_default_account(core: k8s.CoreV1Api, namespace: str, timeout: float = 30.0) -> None:
    """Until ``namespace`` can take pods that name no account: the serviceaccount controller
    makes ``default`` shortly after the namespace, and pods created before are refused."""
    deadline = time.monotonic() + timeout
    while not has_default_account(core, namespace):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no service account {namespace}/default after {timeout:.0f}s")
        time.sleep(0.2)


def admin_client(plane: ControlPlane) -> k8s.ApiClient:
    """A ``kubernetes`` client with the admin token (for tests and tools, never Handoff)."""
    return k8s_config.new_client_from_config(config_file=str(plane.admin_kubeconfig))


def grant_reader(plane: ControlPlane, rbac: Path, out: Path) -> Path:
    """Apply ``rbac`` (deploy/rbac.yaml) as admin; write to ``out`` a kubeconfig for the
    service account it binds, with the token the token controller issued to it."""
    documents = [d for d in yaml.safe_load_all(rbac.read_text()) if d]
    with admin_client(plane) as api:
        k8s_utils.create_from_yaml(api, yaml_objects=documents)
        account = next(d for d in documents if d["kind"] == "ServiceAccount")["metadata"]
        token = service_account_token(api, account["namespace"], account["name"])
    return plane.write_kubeconfig(out, account["name"], token)


def service_account_token(
    api: k8s.ApiClient, namespace: str, name: str, timeout: float = 30.0
) -> str:
    """The token of the service account's (first) token Secret, once the token controller
    has made one; a deleted Secret is replaced by a new token."""
    core = k8s.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        account = core.read_namespaced_service_account(name, namespace)
        for ref in account.secrets or ():
            try:
                secret = core.read_namespaced_secret(ref.name, namespace)
            except k8s.ApiException as exc:
                if exc.status != 404:
                    raise
                continue
            if (secret.data or {}).get("token"):
                return base64.b64decode(secret.data["token"]).decode()
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"no token for service account {namespace}/{name} after {timeout:.0f}s"
            )
        time.sleep(0.2)


def audit_args(directory: Path, users: Sequence[str]) -> list[str]:
    """kube-apiserver flags that log every request of ``users`` (and nobody else's)."""
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived"],
        "rules": [{"level": "Metadata", "users": list(users)}, {"level": "None"}],
    }
    path = directory / "audit-policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    return [f"--audit-policy-file={path}", f"--audit-log-path={directory / 'audit.log'}"]


def component_version(binary: Path) -> str:
    """``v1.20.2`` from ``kube-apiserver --version`` ("Kubernetes v1.20.2")."""
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.split()[-1] if out.stdout.split() else ""


def make_pki(pki: Path) -> None:
    """A CA, the API server's serving certificate for 127.0.0.1 and localhost signed by it,
    and the service-account signing key pair (the openssl command Debian ships)."""
    pki.mkdir(parents=True, exist_ok=True)
    make_ca(pki, "ca", "handoff-test-ca")
    (pki / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl(
        pki,
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "apiserver.key",
        "-out",
        "apiserver.csr",
        "-subj",
        "/CN=kube-apiserver",
    )
    _openssl(
        pki,
        "x509",
        "-req",
        "-in",
        "apiserver.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "30",
        "-extfile",
        "san.cnf",
        "-out",
        "apiserver.crt",
    )
    _openssl(pki, "genrsa", "-out", "sa.key", "2048")
    _openssl(pki, "rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")


def make_ca(folder: Path, name: str, common_name: str) -> Path:
    """A self-signed CA ``folder/name.crt`` (key ``name.key``); returns the certificate."""
    folder.mkdir(parents=True, exist_ok=True)
    _openssl(
        folder,
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "30",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.crt",
        "-subj",
        f"/CN={common_name}",
    )
    return folder / f"{name}.crt"


def _openssl(folder: Path, *args: str) -> None:
    done = subprocess.run(
        ["openssl", *args], cwd=folder, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {done.stderr.strip()}")


def _stop(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL what outlives ``timeout``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
