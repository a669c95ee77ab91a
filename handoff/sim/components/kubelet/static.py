"""Static pods and their mirror pods (pkg/kubelet/config/file.go, pkg/kubelet/pod/
mirror_client.go): manifests run without the API, mirrored into it, recreated when deleted."""

from __future__ import annotations

import hashlib

import orjson

from handoff.sim.components.apiserver import ApiError, owner_ref
from handoff.sim.components.kubelet.state import KubeletBase, PodState
from handoff.sim.objects import (
    Obj,
    edit,
    pod_requests,
    stamp,
)


class StaticPods(KubeletBase):
    """Static pods from manifest files and the mirror pods that show them."""

    def _static_uid(self, manifest: Obj) -> str:
        digest = hashlib.md5(
            orjson.dumps(manifest, option=orjson.OPT_SORT_KEYS) + self.name.encode()
        )
        return digest.hexdigest()

    def _start_static(self, name: str) -> None:
        manifest = self.static[name]
        uid = self._static_uid(manifest)
        spec = dict(manifest["spec"])
        spec["nodeName"] = self.name
        meta = dict(manifest["metadata"])
        meta["name"] = f"{name}-{self.name}"
        meta.setdefault("namespace", "kube-system")
        meta["uid"] = uid
        meta["creationTimestamp"] = stamp(self.loop.now)
        static_pod = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": meta,
            "spec": spec,
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        ps = PodState(static_pod, uid, static=True)
        ps.cpu, ps.mem = pod_requests(static_pod)
        self.used_cpu += ps.cpu
        self.used_mem += ps.mem
        self.used_pods += 1
        self.static_states[meta["name"]] = ps
        ps.seen = self.loop.now
        self._create_mirror(ps)
        self._run(ps)

    def _create_mirror(self, ps: PodState) -> None:
        if not self._alive():
            return
        meta = ps.pod["metadata"]
        node = self.api.find("nodes", "", self.name)
        if node is None:
            return
        seen = ps.seen
        annotations = dict(meta.get("annotations") or {})
        annotations.update(
            {
                "kubernetes.io/config.hash": ps.uid,
                "kubernetes.io/config.mirror": ps.uid,
                "kubernetes.io/config.seen": _nano(seen),
                "kubernetes.io/config.source": "file",
            }
        )
        mirror = {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {
                "name": meta["name"],
                "namespace": meta["namespace"],
                "labels": dict(meta.get("labels") or {}),
                "annotations": annotations,
                "ownerReferences": [owner_ref(node, controller=True, block=False)],
            },
            "spec": ps.pod["spec"],
            "status": {"phase": "Pending", "qosClass": "Burstable"},
        }
        try:
            created = self.api.create("pods", mirror)
        except ApiError:
            return
        self.mirrors[meta["name"]] = created["metadata"]["uid"]
        if ps.start_time:
            self._status_soon(ps)

    def _on_mirror(self, type_: str, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        ps = self.static_states.get(name)
        if ps is None:
            if type_ != "DELETED":
                self._delete_now(pod)  # an orphaned mirror pod: no manifest backs it
            return
        if type_ != "DELETED" and pod["metadata"].get("deletionTimestamp"):
            self._delete_now(pod)  # a deleted mirror pod goes at once; the file still rules
            return
        if type_ == "DELETED" and self.mirrors.get(name) == pod["metadata"]["uid"]:
            self.mirrors.pop(name, None)
            if name in self.static_states:
                self._later(self.t.mirror_recreate, self._create_mirror, ps)

    def _write_mirror_status(self, ps: PodState) -> None:
        meta = ps.pod["metadata"]
        mirror = self.api.find("pods", meta["namespace"], meta["name"])
        if mirror is None or mirror["metadata"]["uid"] != self.mirrors.get(meta["name"]):
            return
        new = edit(mirror, "status")
        new["status"] = self.build_status(ps, mirror["status"])
        if new["status"] != mirror["status"]:
            self._write(new)

    def remove_static(self, name: str) -> None:
        """The manifest file is deleted: noticed at the next file check, then torn down."""
        self.static.pop(name, None)
        full = f"{name}-{self.name}"
        self._later(self.loop.uniform((0.0, self.t.file_check)), self._stop_static, full)

    def _stop_static(self, full: str) -> None:
        ps = self.static_states.pop(full, None)
        if ps is None:
            return
        ps.terminating = True
        for c in ps.pod["spec"]["containers"]:
            self.recorder.event(
                ps.pod,
                "Normal",
                "Killing",
                f"Stopping container {c['name']}",
                f"spec.containers{{{c['name']}}}",
            )
        self._release(ps)
        mirror = self.api.find("pods", ps.pod["metadata"]["namespace"], full)
        if mirror is not None:
            self._later(self.loop.uniform((20.0, 30.0)), self._delete_now, mirror)


def _nano(t: float) -> str:
    """RFC3339Nano as Go prints it: trailing zeros of the fraction dropped."""
    ns = round(t * 1_000_000_000)
    frac = f"{ns % 1_000_000_000:09d}".rstrip("0")
    base = stamp(ns // 1_000_000_000)[:-1]
    return f"{base}.{frac}Z" if frac else f"{base}Z"
