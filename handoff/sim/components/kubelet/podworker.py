"""The pod workers (pkg/kubelet/pod_workers.go, kuberuntime): sandbox, image pulls,
containers created and started in order, readiness, restarts with back-off, and
termination finished by the kubelet's grace-0 delete."""

from __future__ import annotations

import hashlib

from handoff.sim.components.kubelet.state import Behaviour, KubeletBase, PodState
from handoff.sim.objects import (
    Obj,
    go_duration,
    stamp,
)

BAD_IMAGE_MARKERS = ("doesnotexist", "does-not-exist", "nonexistent", ":typo")


class PodWorkers(KubeletBase):
    """One pod's lifecycle on the node, step by step in virtual time."""

    def _run(self, ps: PodState) -> None:
        pod = ps.pod
        spec = pod["spec"]
        ps.start_time = self.loop.now
        ps.behaviour = Behaviour.of(pod)
        waiting = "PodInitializing" if spec.get("initContainers") else "ContainerCreating"
        ps.init = [_container_state(c["name"], c["image"]) for c in spec.get("initContainers", ())]
        for c in ps.init:
            c["state"] = {"waiting": {"reason": "PodInitializing"}}
        ps.app = [_container_state(c["name"], c["image"]) for c in spec["containers"]]
        for c in ps.app:
            c["state"] = {"waiting": {"reason": waiting}}
        self._status_soon(ps)
        self._later(self.t.sandbox, self._sandbox_ready, ps)

    def _sandbox_ready(self, ps: PodState) -> None:
        if ps.terminating or ps.done:
            return
        ps.sandbox = True
        ps.pod_ip = self._next_ip()
        # No status write here: the pod worker is still inside this syncPod (pulling,
        # starting); the next write comes when PLEG reports the containers started.
        self._next_container(ps)

    def _next_ip(self) -> str:
        self.ip_seq += 1
        return f"{self.ip_prefix}{self.ip_seq % 250 + 2}"

    def _next_container(self, ps: PodState) -> None:
        """Start the next init container, or every app container once init is done."""
        spec = ps.pod["spec"]
        for i, c in enumerate(ps.init):
            if "terminated" not in c["state"]:
                self._pull(ps, spec["initContainers"][i], c, "initContainers", i)
                return
        for i, c in enumerate(ps.app):
            if "running" not in c["state"] and "terminated" not in c["state"]:
                self._pull(ps, spec["containers"][i], c, "containers", i)

    def _pull(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        policy = spec_c.get("imagePullPolicy", "IfNotPresent")
        if image in self.images and policy != "Always":
            self.recorder.event(
                ps.pod,
                "Normal",
                "Pulled",
                f'Container image "{image}" already present on machine',
                path,
            )
            self._later(self.t.create, self._create, ps, spec_c, c, group, i)
            return
        self.recorder.event(ps.pod, "Normal", "Pulling", f'Pulling image "{image}"', path)
        took = self.loop.uniform(self.t.pull)
        self._later(took, self._pulled, ps, spec_c, c, group, i, took)

    def _pulled(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int, took: float) -> None:
        if ps.terminating or ps.done:
            return
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        if any(marker in image for marker in BAD_IMAGE_MARKERS):
            self._pull_failed(ps, spec_c, c, group, i)
            return
        self.images.add(image)
        size = int(self.loop.uniform(self.t.image_size))
        d = go_duration(took)
        self.recorder.event(
            ps.pod,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image}" in {d} ({d} including waiting). '
            f"Image size: {size} bytes.",
            path,
        )
        self._later(self.t.create, self._create, ps, spec_c, c, group, i)

    def _pull_failed(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        ref = image if "/" in image else f"docker.io/library/{image}"
        self.recorder.event(
            ps.pod,
            "Warning",
            "Failed",
            f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed to pull '
            f'and unpack image "{ref}": failed to resolve reference "{ref}": {ref}: not found',
            path,
        )
        self.recorder.event(ps.pod, "Warning", "Failed", "Error: ErrImagePull", path)
        c["state"] = {"waiting": {"reason": "ErrImagePull", "message": f"failed to pull {image}"}}
        self._status_soon(ps)
        ps.pull_backoff = min(max(ps.pull_backoff * 2, self.t.backoff_initial), self.t.backoff_max)
        self._later(1.0, self._pull_backoff, ps, spec_c, c, group, i)

    def _pull_backoff(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        if ps.terminating or ps.done:
            return
        image = spec_c["image"]
        path = f"spec.{group}{{{spec_c['name']}}}"
        self.recorder.event(ps.pod, "Normal", "BackOff", f'Back-off pulling image "{image}"', path)
        self.recorder.event(ps.pod, "Warning", "Failed", "Error: ImagePullBackOff", path)
        c["state"] = {
            "waiting": {
                "reason": "ImagePullBackOff",
                "message": f'Back-off pulling image "{image}"',
            }
        }
        self._status_soon(ps)
        self._later(ps.pull_backoff, self._pull, ps, spec_c, c, group, i)

    def _create(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        if ps.terminating or ps.done:
            return
        path = f"spec.{group}{{{spec_c['name']}}}"
        self.recorder.event(
            ps.pod, "Normal", "Created", f"Created container: {spec_c['name']}", path
        )
        self._later(self.t.start, self._started, ps, spec_c, c, group, i)

    def _started(self, ps: PodState, spec_c: Obj, c: Obj, group: str, i: int) -> None:
        if ps.terminating or ps.done:
            return
        path = f"spec.{group}{{{spec_c['name']}}}"
        self.recorder.event(
            ps.pod, "Normal", "Started", f"Started container {spec_c['name']}", path
        )
        now = self.loop.now
        c["state"] = {"running": {"startedAt": stamp(now)}}
        c["started"] = True
        c["containerID"] = f"containerd://{ps.uid.replace('-', '')}{i:02d}{c['restartCount']:04d}"
        c["imageID"] = image_id(spec_c["image"])
        if group == "initContainers":
            self._later(self.t.init_run, self._init_done, ps, c)
            self._status_soon(ps, self.t.pleg)
            return
        # Without a readiness probe a started container is ready at once.
        c["ready"] = "readinessProbe" not in spec_c
        if all("running" in x["state"] for x in ps.app):
            ps.phase = "Running"
            ps.ready = all(x["ready"] for x in ps.app)
            if not ps.ready:
                self._later(self.t.ready, self._ready, ps)
        gen = ps.generation
        if ps.behaviour.run_for is not None:
            self._later(ps.behaviour.run_for, self._exited, ps, spec_c, c, i, gen)
        self._status_soon(ps, self.t.pleg)

    def _init_done(self, ps: PodState, c: Obj) -> None:
        if ps.terminating or ps.done:
            return
        started = c["state"].get("running", {}).get("startedAt", stamp(self.loop.now))
        c["state"] = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": stamp(self.loop.now),
                "containerID": c.get("containerID", ""),
            }
        }
        c["started"] = False
        c["ready"] = True
        self._status_soon(ps, self.t.pleg)
        self._next_container(ps)

    def _ready(self, ps: PodState) -> None:
        if ps.terminating or ps.done or ps.phase != "Running":
            return
        for c in ps.app:
            if "running" in c["state"]:
                c["ready"] = True
        ps.ready = all(c["ready"] for c in ps.app)
        self._status_soon(ps)

    def _exited(self, ps: PodState, spec_c: Obj, c: Obj, i: int, gen: int) -> None:
        if ps.terminating or ps.done or gen != ps.generation:
            return
        code = ps.behaviour.exit_code
        now = self.loop.now
        started = c["state"].get("running", {}).get("startedAt", stamp(now))
        terminated = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": started,
            "finishedAt": stamp(now),
            "containerID": c.get("containerID", ""),
        }
        c["ready"] = False
        c["started"] = False
        ps.ready = False
        policy = ps.pod["spec"].get("restartPolicy", "Always")
        if policy == "Never" or (policy == "OnFailure" and code == 0):
            c["state"] = {"terminated": terminated}
            if all("terminated" in x["state"] for x in ps.app):
                codes = [x["state"]["terminated"]["exitCode"] for x in ps.app]
                ps.phase = "Succeeded" if all(x == 0 for x in codes) else "Failed"
                ps.done = True
                self._release(ps)
            self._status_soon(ps, self.t.pleg)
            return
        c["lastState"] = {"terminated": terminated}
        c["restartCount"] += 1
        ps.crash_backoff = min(
            max(ps.crash_backoff * 2, self.t.backoff_initial), self.t.backoff_max
        )
        name = spec_c["name"]
        meta = ps.pod["metadata"]
        message = (
            f"back-off {go_duration(ps.crash_backoff)} restarting failed container={name} "
            f"pod={meta['name']}_{meta['namespace']}({ps.uid})"
        )
        c["state"] = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
        self.recorder.event(
            ps.pod,
            "Warning",
            "BackOff",
            f"Back-off restarting failed container {name} in pod "
            f"{meta['name']}_{meta['namespace']}({ps.uid})",
            f"spec.containers{{{name}}}",
        )
        self._status_soon(ps, self.t.pleg)
        self._later(ps.crash_backoff, self._restart, ps, spec_c, c, i)

    def _restart(self, ps: PodState, spec_c: Obj, c: Obj, i: int) -> None:
        if ps.terminating or ps.done:
            return
        ps.generation += 1
        self._pull(ps, spec_c, c, "containers", i)

    def _terminate(self, ps: PodState) -> None:
        ps.terminating = True
        if ps.done or not ps.sandbox:
            self._finish(ps)
            return
        for i, c in enumerate(ps.app):
            if "running" in c["state"]:
                name = ps.pod["spec"]["containers"][i]["name"]
                self.recorder.event(
                    ps.pod,
                    "Normal",
                    "Killing",
                    f"Stopping container {name}",
                    f"spec.containers{{{name}}}",
                )
        grace = ps.pod["metadata"].get("deletionGracePeriodSeconds", 30)
        self._later(min(self.loop.uniform(self.t.kill), float(grace)), self._killed, ps)

    def _killed(self, ps: PodState) -> None:
        now = self.loop.now
        for c in ps.app:
            running = c["state"].get("running")
            if running is not None:
                c["state"] = {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": running["startedAt"],
                        "finishedAt": stamp(now),
                        "containerID": c.get("containerID", ""),
                    }
                }
            elif "terminated" not in c["state"]:
                c["state"] = {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "ContainerStatusUnknown",
                        "finishedAt": stamp(now),
                    }
                }
            c["ready"] = False
            c["started"] = False
        ps.ready = False
        codes = [c["state"]["terminated"].get("exitCode", 0) for c in ps.app]
        ps.phase = "Succeeded" if all(x == 0 for x in codes) else "Failed"
        self._write_status(ps)
        self._finish(ps)

    def _finish(self, ps: PodState) -> None:
        """Containers are gone: release the pod's resources and delete it with grace 0."""
        self._release(ps)
        ps.done = True
        pod = self.api.find("pods", ps.pod["metadata"]["namespace"], ps.pod["metadata"]["name"])
        if pod is not None and pod["metadata"]["uid"] == ps.uid:
            self._delete_now(pod)

    def _release(self, ps: PodState) -> None:
        """Give back what admission counted, once."""
        if ps.released or not ps.start_time:
            return
        ps.released = True
        self.used_cpu -= ps.cpu
        self.used_mem -= ps.mem
        self.used_pods -= 1

    def _forget(self, ps: PodState) -> None:
        if not ps.done and ps.start_time:
            self._release(ps)
        ps.done = True
        ps.terminating = True
        self.pods.pop(ps.uid, None)


def _container_state(name: str, image: str) -> Obj:
    return {
        "name": name,
        "state": {"waiting": {"reason": "ContainerCreating"}},
        "lastState": {},
        "ready": False,
        "restartCount": 0,
        "image": image,
        "imageID": "",
        "started": False,
    }


_image_ids: dict[str, str] = {}


def image_id(image: str) -> str:
    """A stable digest reference for an image, as containerd reports it."""
    found = _image_ids.get(image)
    if found is None:
        digest = hashlib.sha256(image.encode()).hexdigest()
        found = _image_ids[image] = f"{image.split(':')[0]}@sha256:{digest}"
    return found
