"""Sign-in everywhere outside demo mode; HANDOFF_DEMO=1 signs visitors in read-only."""

import pytest
from django.contrib.auth.models import User

pytestmark = pytest.mark.django_db


def test_it_redirects_anonymous_visitors_to_sign_in(client, settings):
    settings.HANDOFF_DEMO = False
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/")


def test_it_shows_the_home_page_to_signed_in_users(client, settings, redis_client):
    settings.HANDOFF_DEMO = False
    client.force_login(User.objects.create_user("alice", password="x"))
    response = client.get("/")
    assert response.status_code == 200
    assert b"No clusters yet" in response.content
    assert b"Demo mode" not in response.content


def test_it_serves_the_sign_in_page(client, settings):
    settings.HANDOFF_DEMO = False
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"Sign in" in response.content


def test_it_signs_demo_visitors_in_and_says_so(client, settings):
    settings.HANDOFF_DEMO = True
    response = client.get("/")
    assert response.status_code == 200
    assert b'data-testid="demo-banner"' in response.content
    assert b"read-only demo user" in response.content
    assert response.wsgi_request.user.username == "demo"


def test_it_creates_one_demo_user_without_a_password(client, settings):
    settings.HANDOFF_DEMO = True
    client.get("/")
    client.logout()
    client.get("/")
    demo = User.objects.get(username="demo")
    assert not demo.has_usable_password()
    assert not demo.is_staff
    assert not demo.is_superuser


def test_it_refuses_password_sign_in_as_the_demo_user(client, settings):
    settings.HANDOFF_DEMO = False
    User.objects.create_user("demo").set_unusable_password()
    assert not client.login(username="demo", password="")
    assert not client.login(username="demo", password="demo")


def test_it_keeps_the_demo_user_read_only(client, settings):
    settings.HANDOFF_DEMO = True
    client.get("/")
    assert client.post("/accounts/logout/").status_code == 403
    assert client.post("/admin/login/", {"username": "demo"}).status_code == 403


def test_it_keeps_the_demo_user_out_of_the_admin(client, settings):
    settings.HANDOFF_DEMO = True
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
