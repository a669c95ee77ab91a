"""Push: changed pods to the cluster's Channels group, coalesced, with a resumable cursor.

Message (``type`` "cluster.update", the consumer forwards ``data`` as is)::

    {"cursor": "1717000000000-3", "pods": [board row, ...], "removed": [uid, ...],
     "evaluated_at": "...Z", "more": false, "counts": {verdict: n, ...},
     "refresh": false, "changed": 12}

``cursor`` is the id of the last stream entry folded into the state the message shows;
cursors only grow (compare them as (ms, seq) pairs: ``store.stream_id_key``). A client that
loads the pods (with the fold's cursor from ``handoff:{c}:fold``) ignores messages whose
cursor is not newer, and after a reconnect reloads.

Every browser of a cluster gets every message, so they stay small: a pod travels as its
board row (``board_row``: what a triage row shows, a tenth of the whole view; pages
that need more fetch the pod), and a flush that changed more than ``MAX_ROWS`` pods sends
no rows at all but ``refresh: true`` with how many ``changed`` — a burst of thousands of
events becomes one small message, and each page refetches what it shows at its own pace.
``counts`` (pods per verdict, when the fold worker sends them) saves every board a
summary request per message.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import re
import sys
import threading
from typing import Any

log = logging.getLogger(__name__)

GROUP_PREFIX = "cluster."
GROUP_NAME_MAX = 99  # Channels refuses group names of 100 characters and more.
NAME = re.compile(r"^[a-zA-Z0-9\-_.]+$")
MESSAGE_TYPE = "cluster.update"
MAX_PODS = 500  # resume answers (one client each) are split into messages of this many
MAX_ROWS = 100  # a flush changing more pods than this pushes a refresh hint instead
# What a triage row needs of a pod view (webui/static/webui/board.js).
ROW_FIELDS = (
    "uid",
    "namespace",
    "name",
    "node",
    "node_exists",
    "binding",
    "owner",
    "verdict",
    "reason",
    "stages",
    "podgc",
)
ROW_MILESTONES = ("created", "deleted")
SWITCH_INTERVAL = 0.0005  # seconds: see Publisher.publish


def cluster_group(cluster: str) -> str | None:
    """The Channels group of a cluster's live updates, or None for an unusable name."""
    group = GROUP_PREFIX + cluster
    if len(group) > GROUP_NAME_MAX or not NAME.match(cluster):
        return None
    return group


def board_row(view: dict[str, Any]) -> dict[str, Any]:
    """The part of a pod view a triage row shows."""
    row = {key: view.get(key) for key in ROW_FIELDS}
    milestones = view.get("milestones") or {}
    row["milestones"] = {key: milestones.get(key) for key in ROW_MILESTONES}
    return row


def messages(
    cursor: str,
    pods: list[dict[str, Any]],
    removed: list[str],
    evaluated_at: str,
    counts: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The group message(s) for one flush: rows of the changed pods, or a refresh hint."""
    refresh = len(pods) + len(removed) > MAX_ROWS
    data: dict[str, Any] = {
        "cursor": cursor,
        "pods": [] if refresh else [board_row(view) for view in pods],
        "removed": [] if refresh else removed,
        "evaluated_at": evaluated_at,
        "more": False,
        "refresh": refresh,
        "changed": len(pods) + len(removed),
    }
    if counts is not None:
        data["counts"] = counts
    return [{"type": MESSAGE_TYPE, "data": data}]


class Publisher:
    """Sends group messages from a thread of its own, in order, so the fold never waits
    on the channel layer; one event loop, so channels-redis keeps one connection pool."""

    def __init__(self, cluster: str, layer: Any = None) -> None:
        self.group = cluster_group(cluster)
        self._layer = layer
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=1000)
        self._thread: threading.Thread | None = None
        self.sent = 0

    def publish(self, message: dict[str, Any]) -> None:
        if self.group is None:
            return
        if self._thread is None:
            # The fold keeps the GIL busy; at the default 5 ms switch interval each of
            # group_send's Redis round trips waits for it, and pushes queue up behind.
            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL))
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(message)
        except queue.Full:
            # Browsers that cannot keep up reload from the store; the fold goes on.
            log.warning("push queue full for %s: dropping a message", self.group)

    def close(self, timeout: float = 5.0) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        if self._layer is None:
            from channels.layers import get_channel_layer

            self._layer = get_channel_layer()
        loop = asyncio.new_event_loop()
        try:
            while True:
                message = self._queue.get()
                if message is None:
                    return
                try:
                    loop.run_until_complete(self._layer.group_send(self.group, message))
                    self.sent += 1
                except Exception:
                    log.exception("push to %s failed", self.group)
        finally:
            loop.close()
