"""The fold worker's pushes reach a signed-in browser's websocket through the real
channels-redis layer, in order, with cursors that only grow."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from handoff.live import queries, store
from handoff.live.fold import Folder, FoldSettings
from handoff.live.push import Publisher
from handoff.live.sources.playback import replay
from webui.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)
TRACE = Path(__file__).parent.parent / "data" / "traces" / "podgc-new-style.jsonl"


def _fold_and_push(client, cluster: str) -> int:
    publisher = Publisher(cluster)
    folder = Folder(client, cluster, FoldSettings(block_ms=1, batch=5), publisher)
    folder.restore()
    while folder.step():
        folder.flush()
    folder.flush()
    publisher.close()
    return publisher.sent


async def test_a_browser_receives_the_pods_the_fold_changed(redis_client):
    user = await database_sync_to_async(User.objects.create_user)("operator")
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), "/ws/clusters/live/")
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    assert (await comm.receive_json_from(timeout=5))["type"] == "hello"  # then the pushes
    replay(redis_client, "live", TRACE)

    sent = await asyncio.to_thread(_fold_and_push, redis_client, "live")
    received = [await comm.receive_json_from(timeout=5) for _ in range(sent)]
    await comm.disconnect()

    assert sent > 0
    assert {m["type"] for m in received} == {"cluster.update"}
    cursors = [store.stream_id_key(m["data"]["cursor"]) for m in received]
    assert cursors == sorted(cursors)
    final = {}
    for message in received:
        final.update({pod["name"]: pod["verdict"] for pod in message["data"]["pods"]})
    assert final["ghost3"] == "podgc-deleted"


class _Recorder:
    """Stands in for the channel layer's sender: keeps what the fold published."""

    def __init__(self) -> None:
        self.messages: list[dict] = []

    def publish(self, message: dict) -> None:
        self.messages.append(message)


def test_every_push_carries_the_counts_its_flush_left_in_the_store(redis_client):
    recorder = _Recorder()
    folder = Folder(redis_client, "counted", FoldSettings(block_ms=1, batch=3), recorder)
    folder.restore()  # an empty store: the trace comes after, as a watch writes it
    replay(redis_client, "counted", TRACE)
    pushes = 0
    while folder.step():
        folder.flush()
        if len(recorder.messages) > pushes:
            pushes = len(recorder.messages)
            # Read in the flush's own transaction: the store's counts as it left them.
            counts = queries.counts(redis_client, "counted")["verdicts"]
            assert recorder.messages[-1]["data"]["counts"] == counts
    assert pushes > 3
    assert sum(recorder.messages[-1]["data"]["counts"].values()) == len(folder.written)
