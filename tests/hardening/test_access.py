"""Every URL pattern and websocket route, walked anonymously, as the read-only demo user
and as a signed-in non-staff user: nothing from a cluster is served without a sign-in,
nothing changes through a read-only session, and every form needs its CSRF token.

The walk reads the URL resolver, so a page or endpoint added later is covered without
editing this file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from handoff.asgi import application
from webui.routing import websocket_urlpatterns

pytestmark = pytest.mark.django_db

# Public by design: the health probe, the alert runbooks (documentation), signing in and
# out, password reset, and the admin's own sign-in page (the admin redirects everything
# else there).
PUBLIC = (
    "healthz",
    "runbooks",
    "runbook",
    "login",
    "logout",
    "password_reset",
    "password_reset_done",
    "password_reset_confirm",
    "password_reset_complete",
)
SAMPLES = {
    "cluster": "demo",
    "namespace": "default",
    "ns": "default",
    "name": "web-0",
    "node": "node-1",
    "id": "1",
    "pk": "1",
    "uid": "0a7d71ee",
    "path": "x",
    "object_id": "1",
    "app_label": "auth",
    "model_name": "user",
    "uidb64": "MQ",
    "token": "x-y",
    "content_type_id": "1",
    "trace": "x",
}


def _sample(name: str, converter: object) -> str:
    kind = type(converter).__name__
    if kind == "IntConverter":
        return "1"
    if kind == "UUIDConverter":
        return "00000000-0000-0000-0000-000000000001"
    return SAMPLES.get(name, "x")


def walk(patterns=None, prefix: str = "", names: tuple[str, ...] = ()) -> Iterator[tuple[str, str]]:
    """(route name, a concrete path) for every pattern, with sample arguments filled in."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        pattern = entry.pattern
        route = getattr(pattern, "_route", None)
        if route is None:  # a regex pattern: only the admin uses them, walked by prefix
            regex = pattern.regex.pattern.lstrip("^").rstrip("$")
            route = "" if regex.startswith("(?P") else regex.replace("\\", "")
        text = route
        for name, converter in getattr(pattern, "converters", {}).items():
            text = re.sub(rf"<(?:\w+:)?{name}>", _sample(name, converter), text)
        if isinstance(entry, URLResolver):
            yield from walk(entry.url_patterns, prefix + text, (*names, entry.namespace or ""))
        elif isinstance(entry, URLPattern) and "<" not in text and "(?" not in text:
            yield entry.name or entry.lookup_str, "/" + prefix + text


ROUTES = sorted(set(walk()))
SITE = [(n, p) for n, p in ROUTES if not p.startswith("/admin/") and n not in PUBLIC]
ADMIN = [(n, p) for n, p in ROUTES if p.startswith("/admin/") and n not in ("login", "logout")]


def test_the_walk_sees_the_pages() -> None:
    paths = {p for _, p in ROUTES}
    assert "/" in paths
    assert "/healthz" in paths
    assert any(p.startswith("/admin/") for p in paths)


@pytest.mark.parametrize(("name", "path"), SITE, ids=[p for _, p in SITE])
def test_anonymous_visitors_get_nothing(client: Client, settings, name: str, path: str) -> None:
    settings.HANDOFF_DEMO = False
    for method in ("get", "post", "put", "patch", "delete"):
        response = getattr(client, method)(path)
        assert response.status_code in (301, 302, 401, 403, 405), (
            method,
            path,
            response.status_code,
        )
        if response.status_code in (301, 302):
            assert "/accounts/login/" in response["Location"], (method, path)


@pytest.mark.parametrize(("name", "path"), SITE, ids=[p for _, p in SITE])
def test_the_demo_user_can_change_nothing(client: Client, settings, name: str, path: str) -> None:
    settings.HANDOFF_DEMO = True
    client.get("/")  # signs the demo user in
    for method in ("post", "put", "patch", "delete"):
        response = getattr(client, method)(path)
        assert response.status_code in (403, 405), (method, path, response.status_code)


@pytest.mark.parametrize(("name", "path"), ADMIN, ids=[p for _, p in ADMIN])
def test_the_admin_needs_staff(
    client: Client, django_user_model, settings, name: str, path: str
) -> None:
    settings.HANDOFF_DEMO = False
    user = django_user_model.objects.create_user("operator", password="pw-not-used")
    client.force_login(user)
    response = client.get(path)
    assert response.status_code in (302, 403, 404), (path, response.status_code)
    if response.status_code == 302:
        assert "/admin/login/" in response["Location"]


@pytest.mark.parametrize(("name", "path"), SITE, ids=[p for _, p in SITE])
def test_posts_need_a_csrf_token(django_user_model, settings, name: str, path: str) -> None:
    settings.HANDOFF_DEMO = False
    user = django_user_model.objects.create_user("csrf", password="pw-not-used")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    response = client.post(path, {"x": "1"})
    # 405: the route takes no POST at all; anything else must be the CSRF refusal.
    assert response.status_code in (403, 405), (path, response.status_code)


def test_signing_in_needs_the_csrf_token(django_user_model) -> None:
    django_user_model.objects.create_user("alice", password="correct horse")
    client = Client(enforce_csrf_checks=True)
    response = client.post("/accounts/login/", {"username": "alice", "password": "correct horse"})
    assert response.status_code == 403


WS_PATHS = [
    "/" + route.pattern.regex.pattern.lstrip("^").rstrip("$").replace("(?P<cluster>[^/]+)", "demo")
    for route in websocket_urlpatterns
]


@pytest.mark.parametrize("path", WS_PATHS)
async def test_websockets_refuse_anonymous_clients(path: str) -> None:
    comm = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://127.0.0.1")])
    connected, _ = await comm.connect()
    if connected:
        message = await comm.receive_output(timeout=2)
        assert message == {"type": "websocket.close", "code": 4401}
    await comm.disconnect()
