"""The slice of Kubernetes objects Handoff reads, as msgspec structs.

Decoding a watch line straight into these skips every field Handoff does not
use (container specs, volumes, managedFields, env values...) without building
Python objects for them: that is what lets the fold run close to the speed of
parsing, and it keeps secrets out of memory by construction.

One ``KubeObject`` holds the fields of every kind the fold reads (Pod, Node,
Event of both API groups, and the Status of a watch ERROR); fields of other
kinds are simply absent. Field names are the API's, camelCase included.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

# Epoch seconds of each "YYYY-MM-DDTHH:MM:SS" of the microsecond times read so far (a
# trace's ``observed``, an Event's ``eventTime``): consecutive times share their second,
# so a time is that second plus its fraction. One cache for ``trace`` and ``facts``,
# which read the same instants.
SECONDS: dict[str, float] = {}
SECONDS_MAX = 100_000


def note_second(text: str, moment: datetime) -> None:
    """Remember the second of ``text`` (an aware ``moment``) when it has the common
    form ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if len(text) == 27 and text[19] == "." and text[26] == "Z":
        if len(SECONDS) >= SECONDS_MAX:
            SECONDS.clear()
        SECONDS[text[:19]] = moment.replace(microsecond=0).timestamp()


# gc=False: these never form reference cycles, and untracked objects make
# both the decode and the garbage collector cheaper.


class OwnerReference(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""
    controller: bool | None = None


class Labels(msgspec.Struct, gc=False):
    """The one label Handoff reads: a Deployment's pods carry their ReplicaSet's
    template hash (pkg/controller/deployment/sync.go); every other label is skipped."""

    template_hash: str | None = msgspec.field(default=None, name="pod-template-hash")


class Annotations(msgspec.Struct, gc=False):
    """The annotations that mark a mirror (static) pod; every other annotation,
    ``last-applied-configuration`` included, is skipped by the decoder unread."""

    mirror: str | None = msgspec.field(default=None, name="kubernetes.io/config.mirror")
    source: str | None = msgspec.field(default=None, name="kubernetes.io/config.source")
    hash: str | None = msgspec.field(default=None, name="kubernetes.io/config.hash")


class ObjectMeta(msgspec.Struct, gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resourceVersion: str = ""
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    finalizers: list[str] | None = None
    annotations: Annotations | None = None
    labels: Labels | None = None
    ownerReferences: list[OwnerReference] | None = None


class Condition(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class StateDetail(msgspec.Struct, gc=False):
    reason: str | None = None
    startedAt: str | None = None
    finishedAt: str | None = None
    exitCode: int | None = None


class ContainerState(msgspec.Struct, gc=False):
    waiting: StateDetail | None = None
    running: StateDetail | None = None
    terminated: StateDetail | None = None


class ContainerStatus(msgspec.Struct, gc=False):
    state: ContainerState | None = None


class Taint(msgspec.Struct, gc=False):
    key: str = ""
    value: str | None = None
    effect: str = ""
    timeAdded: str | None = None


class Spec(msgspec.Struct, gc=False):
    """PodSpec and NodeSpec: the fields Handoff reads of either."""

    nodeName: str | None = None
    taints: list[Taint] | None = None
    unschedulable: bool | None = None


class Status(msgspec.Struct, gc=False):
    """PodStatus and NodeStatus: the fields Handoff reads of either."""

    phase: str | None = None
    reason: str | None = None
    message: str | None = None
    startTime: str | None = None
    hostIP: str | None = None
    conditions: list[Condition] | None = None
    containerStatuses: list[ContainerStatus] | None = None
    initContainerStatuses: list[ContainerStatus] | None = None


class ObjectReference(msgspec.Struct, gc=False):
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""


class EventSource(msgspec.Struct, gc=False):
    component: str = ""
    host: str = ""


class EventSeries(msgspec.Struct, gc=False):
    count: int | None = None
    lastObservedTime: str | None = None


class KubeObject(msgspec.Struct, gc=False):
    kind: str = ""
    apiVersion: str = ""
    metadata: ObjectMeta | None = None
    spec: Spec | None = None
    # A Pod's or Node's status object; the string "Failure" in a watch ERROR's Status.
    status: Status | str | None = None
    # Events: core/v1 and events.k8s.io/v1 (and reason/message/code of a Status)
    involvedObject: ObjectReference | None = None
    regarding: ObjectReference | None = None
    reason: str | None = None
    message: str | None = None
    note: str | None = None
    type: str | None = None
    source: EventSource | None = None
    deprecatedSource: EventSource | None = None
    firstTimestamp: str | None = None
    lastTimestamp: str | None = None
    eventTime: str | None = None
    deprecatedFirstTimestamp: str | None = None
    deprecatedLastTimestamp: str | None = None
    count: int | None = None
    deprecatedCount: int | None = None
    series: EventSeries | None = None
    reportingComponent: str | None = None
    reportingController: str | None = None
    code: int | None = None


class WatchLine(msgspec.Struct, gc=False):
    """A trace line (see docs/trace-format.md), decoded in one step."""

    observed: str | None = None
    type: str | None = None
    object: KubeObject | None = None
    cluster: str | None = None


LINE_DECODER = msgspec.json.Decoder(WatchLine)
ValidationError = msgspec.ValidationError
DecodeError = msgspec.DecodeError


def to_object(raw: dict[str, Any]) -> KubeObject:
    """A Kubernetes object given as a dict (an import, a test), read the same way.

    Raises ``ValidationError`` when a field Handoff reads has the wrong type.
    """
    return msgspec.convert(raw, KubeObject)
