"""/ws/clusters/<name>/: refuses anonymous users, validates the group, joins it.
The hello/resume protocol is tested in tests/webui/test_consumer.py."""

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import AnonymousUser, User

from handoff.asgi import application
from webui.board.consumers import CLOSE_BAD_CLUSTER, CLOSE_UNAUTHENTICATED, cluster_group
from webui.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db(transaction=True)


def communicator(path: str, user) -> WebsocketCommunicator:
    from channels.routing import URLRouter

    comm = WebsocketCommunicator(URLRouter(websocket_urlpatterns), path)
    comm.scope["user"] = user
    return comm


async def test_it_closes_anonymous_connections_with_4401():
    comm = communicator("/ws/clusters/demo/", AnonymousUser())
    connected, _ = await comm.connect()
    assert connected
    assert await comm.receive_output() == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}
    await comm.disconnect()


async def test_it_refuses_anonymous_through_the_full_asgi_stack():
    comm = WebsocketCommunicator(
        application, "/ws/clusters/demo/", headers=[(b"origin", b"http://127.0.0.1")]
    )
    await comm.connect()
    assert (await comm.receive_output())["code"] == CLOSE_UNAUTHENTICATED
    await comm.disconnect()


async def test_it_refuses_foreign_origins():
    comm = WebsocketCommunicator(
        application, "/ws/clusters/demo/", headers=[(b"origin", b"http://evil.example")]
    )
    connected, _ = await comm.connect()
    assert not connected
    await comm.disconnect()


async def test_it_forwards_group_messages_to_signed_in_users():
    user = await database_sync_to_async(User.objects.create_user)("alice")
    comm = communicator("/ws/clusters/kind-dev.eu_1/", user)
    connected, _ = await comm.connect()
    assert connected
    assert (await comm.receive_json_from(timeout=2))["type"] == "hello"
    await get_channel_layer().group_send(
        "cluster.kind-dev.eu_1", {"type": "cluster.update", "data": {"cursor": 1}}
    )
    assert await comm.receive_json_from(timeout=2) == {
        "type": "cluster.update",
        "data": {"cursor": 1},
    }
    await comm.disconnect()


async def test_it_closes_connections_for_invalid_cluster_names():
    user = await database_sync_to_async(User.objects.create_user)("bob")
    comm = communicator("/ws/clusters/" + "a" * 100 + "/", user)
    await comm.connect()
    assert (await comm.receive_output())["code"] == CLOSE_BAD_CLUSTER
    await comm.disconnect()


@pytest.mark.parametrize(
    ("cluster", "group"),
    [
        ("prod", "cluster.prod"),
        ("kind-dev.eu_1", "cluster.kind-dev.eu_1"),
        ("a" * 91, "cluster." + "a" * 91),
        ("a" * 92, None),
        ("bad name", None),
        ("<img>", None),
        ("", None),
    ],
)
def test_cluster_group_accepts_only_what_channels_accepts(cluster, group):
    assert cluster_group(cluster) == group
