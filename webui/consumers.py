"""Websocket endpoint a cluster's pages subscribe to for live changes.

The ingestion publishes to the cluster's group; the content of those messages and the
snapshot/cursor protocol arrive with the dashboard (issue 6).
"""

import re

from channels.generic.websocket import AsyncJsonWebsocketConsumer

# Channels refuses other group names; checking here turns that into a clean close code.
GROUP_NAME = re.compile(r"^[a-zA-Z0-9\-_.]+$")
GROUP_NAME_MAX = 99
GROUP_PREFIX = "cluster."

CLOSE_UNAUTHENTICATED = 4401
CLOSE_BAD_CLUSTER = 4400


def cluster_group(cluster: str) -> str | None:
    """The Channels group of a cluster's live updates, or None for an unusable name."""
    group = GROUP_PREFIX + cluster
    if len(group) > GROUP_NAME_MAX or not GROUP_NAME.match(cluster):
        return None
    return group


class ClusterConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        # Accept first, so the browser sees why it was closed rather than a failed handshake.
        await self.accept()
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        group = cluster_group(self.scope["url_route"]["kwargs"]["cluster"])
        if group is None:
            await self.close(code=CLOSE_BAD_CLUSTER)
            return
        self.group = group
        await self.channel_layer.group_add(group, self.channel_name)

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: dict, **kwargs) -> None:
        # Read-only stream: clients have nothing to say yet.
        pass

    async def cluster_update(self, event: dict) -> None:
        await self.send_json({"type": "cluster.update", "data": event["data"]})
