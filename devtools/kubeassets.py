"""Where the Kubernetes control-plane binaries come from: ``HANDOFF_K8S_ASSETS`` (a folder
holding ``kube-apiserver``, ``kube-scheduler`` and ``kube-controller-manager``, or the
``k8s-bin.tar.xz`` that ``make kube-assets`` builds), then ``KUBEBUILDER_ASSETS`` (the
envtest convention), and ``etcd`` from either folder or PATH (Debian: ``etcd-server``).

A tarball is unpacked once into a cache named for its SHA-256; when a ``SHA256SUMS`` lies
beside it, the unpacked binaries must match it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path

COMPONENTS = ("kube-apiserver", "kube-scheduler", "kube-controller-manager")
TARBALL = "k8s-bin.tar.xz"
SUMS = "SHA256SUMS"
VARIABLES = ("HANDOFF_K8S_ASSETS", "KUBEBUILDER_ASSETS")
# The version the project's recorded behaviour belongs to (docs/real-control-plane.md).
VERSION = "v1.20.2"


class AssetsMissing(Exception):
    """The binaries cannot be found; the message is one line naming what to set."""


def find_binaries(
    env: Mapping[str, str] | None = None, cache: Path | None = None
) -> dict[str, Path]:
    """Paths of kube-apiserver, kube-scheduler, kube-controller-manager and etcd."""
    env = os.environ if env is None else env
    folders = [Path(env[name]) for name in VARIABLES if env.get(name)]
    if not folders:
        raise AssetsMissing(
            f"HANDOFF_K8S_ASSETS is not set: point it at a folder holding {', '.join(COMPONENTS)}"
            f" {VERSION} or {TARBALL} (make kube-assets builds it; KUBEBUILDER_ASSETS also works)"
        )
    found: dict[str, Path] = {}
    for folder in folders:
        for place in _places(folder, cache or default_cache(env)):
            for name in (*COMPONENTS, "etcd"):
                if name not in found and os.access(place / name, os.X_OK):
                    found[name] = place / name
    etcd = shutil.which("etcd", path=env.get("PATH"))
    if "etcd" not in found and etcd:
        found["etcd"] = Path(etcd)
    missing = [name for name in COMPONENTS if name not in found]
    if missing:
        where = " or ".join(f"{n}={env[n]}" for n in VARIABLES if env.get(n))
        raise AssetsMissing(f"{where} holds no {', '.join(missing)} (nor {TARBALL})")
    if "etcd" not in found:
        raise AssetsMissing("no etcd on PATH: apt-get install etcd-server")
    return found


def _places(folder: Path, cache: Path) -> list[Path]:
    """The folder itself, and its tarball's unpacked copy when it has one."""
    places = [folder]
    if (folder / TARBALL).is_file():
        places.append(unpack(folder / TARBALL, cache))
    return places


def default_cache(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "handoff"


def unpack(tarball: Path, cache: Path) -> Path:
    """The tarball's contents in ``cache/k8s-bin-<sha256 prefix>``, unpacked on first use
    (into a scratch folder renamed into place, so concurrent runs never see half a file)."""
    digest = _sha256(tarball)[:16]
    target = cache / f"k8s-bin-{digest}"
    if target.is_dir():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".unpack-", dir=cache))
    try:
        with tarfile.open(tarball, "r:xz") as archive:
            archive.extractall(scratch, filter="data")
        sums = tarball.with_name(SUMS)
        if sums.is_file():
            check_sums(scratch, sums)
        try:
            scratch.rename(target)
        except OSError:
            if not target.is_dir():  # another run won the race: use its copy
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def check_sums(folder: Path, sums: Path) -> None:
    """Every file ``sums`` lists (``sha256sum`` format) has that digest in ``folder``."""
    for line in sums.read_text().splitlines():
        if not line.strip():
            continue
        digest, name = line.split(maxsplit=1)
        name = name.lstrip("*")
        if _sha256(folder / name) != digest:
            raise AssetsMissing(f"{folder / name} does not match {sums}")


def _sha256(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            hasher.update(chunk)
    return hasher.hexdigest()
