"""Websocket endpoint a cluster's pages subscribe to for live changes.

The ingestion publishes to the cluster's group; the content of those messages and the
snapshot/cursor protocol arrive with the dashboard (issue 6).
"""

from channels.generic.websocket import AsyncJsonWebsocketConsumer

# The group name (and what makes a cluster name usable for it) is the ingestion's: it
# publishes there (handoff/push.py).
from handoff.push import GROUP_PREFIX, cluster_group  # noqa: F401 - re-exported

CLOSE_UNAUTHENTICATED = 4401
CLOSE_BAD_CLUSTER = 4400


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
