"""The websocket protocol: hello on connect, resume from a cursor, reload when too old.

Pods are written as the fold worker writes them (store.write_pods in a pipeline, then the
fold's cursor), against the real test redis and the real channels-redis layer.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User

from handoff.live import clusters
from webui.board.consumers import CLOSE_UNAUTHENTICATED
from webui.routing import websocket_urlpatterns

from .pods import FoldWriter, make_views, template

pytestmark = pytest.mark.django_db(transaction=True)
CLUSTER = "resume"


@pytest.fixture
def fold(redis_client):
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    fold = FoldWriter(redis_client, CLUSTER)
    fold.views = make_views(template(redis_client), 12)
    fold.flush(fold.views.values())
    return fold


async def _connect(path: str, user=None) -> WebsocketCommunicator:
    if user is None:
        user = await database_sync_to_async(User.objects.create_user)("operator")
    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    comm.scope["user"] = user
    connected, _ = await comm.connect()
    assert connected
    return comm


async def test_it_says_hello_with_the_cursor_and_the_counts(fold):
    comm = await _connect(f"/ws/clusters/{CLUSTER}/")
    hello = await comm.receive_json_from(timeout=5)
    await comm.disconnect()
    assert hello["type"] == "hello"
    assert hello["data"]["cursor"] == f"{fold.ms}-0"
    assert hello["data"]["summary"]["pods"] == 12


async def test_a_client_reconnecting_gets_what_it_missed_since_its_cursor(fold):
    held = f"{fold.ms}-0"  # what the client had seen when its socket dropped
    views = list(fold.views.values())
    changed = {**views[0], "verdict": "stuck" if views[0]["verdict"] != "stuck" else "running"}
    await asyncio.to_thread(fold.flush, [changed])
    await asyncio.to_thread(fold.flush, [], [views[1]["uid"]])
    now = f"{fold.ms}-0"

    comm = await _connect(f"/ws/clusters/{CLUSTER}/?cursor={held}")
    hello = await comm.receive_json_from(timeout=5)
    resume = await comm.receive_json_from(timeout=5)
    assert hello["type"] == "hello"
    assert resume["type"] == "resume"
    assert resume["data"]["from"] == held
    assert resume["data"]["cursor"] == now
    assert [p["uid"] for p in resume["data"]["pods"]] == [changed["uid"]]
    assert resume["data"]["pods"][0]["verdict"] == changed["verdict"]
    assert resume["data"]["removed"] == [views[1]["uid"]]

    # Then live deltas, and a resume asked for by message gives nothing new.
    await get_channel_layer().group_send(
        f"cluster.{CLUSTER}", {"type": "cluster.update", "data": {"cursor": now, "pods": []}}
    )
    assert (await comm.receive_json_from(timeout=5))["type"] == "cluster.update"
    await comm.send_json_to({"type": "resume", "cursor": now})
    again = await comm.receive_json_from(timeout=5)
    assert again["type"] == "resume"
    assert again["data"]["pods"] == []
    assert again["data"]["removed"] == []
    await comm.disconnect()


async def test_it_resends_nothing_older_than_the_cursor(fold):
    held = f"{fold.ms}-0"
    comm = await _connect(f"/ws/clusters/{CLUSTER}/?cursor={held}")
    await comm.receive_json_from(timeout=5)
    resume = await comm.receive_json_from(timeout=5)
    await comm.disconnect()
    assert resume["data"]["pods"] == []


@pytest.mark.parametrize("cursor", ["1-0", "nonsense"])
async def test_it_tells_a_client_to_reload_when_the_cursor_is_unusable(fold, cursor):
    comm = await _connect(f"/ws/clusters/{CLUSTER}/?cursor={cursor}")
    await comm.receive_json_from(timeout=5)
    reload = await comm.receive_json_from(timeout=5)
    await comm.disconnect()
    assert reload["type"] == "reload"
    assert reload["data"]["cursor"] == f"{fold.ms}-0"
    assert reload["data"]["reason"]


async def test_it_tells_a_client_to_reload_rather_than_send_thousands(redis_client):
    clusters.register_cluster(redis_client, clusters.ClusterConfig(name=CLUSTER, kind="trace"))
    fold = FoldWriter(redis_client, CLUSTER)
    held = fold.flush()
    await asyncio.to_thread(fold.flush, make_views(template(redis_client), 2500).values())
    comm = await _connect(f"/ws/clusters/{CLUSTER}/?cursor={held}")
    await comm.receive_json_from(timeout=5)
    reload = await comm.receive_json_from(timeout=5)
    await comm.disconnect()
    assert reload["type"] == "reload"
    assert "2000" in reload["data"]["reason"]


async def test_it_refuses_anonymous_clients_before_any_data(fold):
    comm = await _connect(f"/ws/clusters/{CLUSTER}/?cursor=1-0", AnonymousUser())
    assert await comm.receive_output(timeout=5) == {
        "type": "websocket.close",
        "code": CLOSE_UNAUTHENTICATED,
    }
    # End as Daphne would (the browser saw the close), so the consumer's channel-layer
    # receive ends in this test rather than being cancelled with the test's event loop.
    await comm.disconnect()


@pytest.mark.slow
async def test_an_idle_subscriber_still_gets_the_next_update(fold):
    # channels-redis waits for a message with BZPOPMIN 5 s; redis-py 8 reads every socket
    # with a 5 s timeout by default, so a quiet cluster's consumer died after ~5 s (and the
    # browser reconnected every 5 s). Two of those periods of silence, then an update.
    comm = await _connect(f"/ws/clusters/{CLUSTER}/")
    assert (await comm.receive_json_from(timeout=5))["type"] == "hello"
    await asyncio.sleep(12)
    update = {"type": "cluster.update", "data": {"cursor": f"{fold.ms}-0", "pods": []}}
    await get_channel_layer().group_send(f"cluster.{CLUSTER}", update)
    assert (await comm.receive_json_from(timeout=5))["type"] == "cluster.update"
    await comm.disconnect()
