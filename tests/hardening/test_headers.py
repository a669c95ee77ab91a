"""Production responses carry the security headers (and a strict CSP), cookies are
secure, and the session cookie is not readable from scripts."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def production(settings):
    settings.DEBUG = False
    settings.HANDOFF_DEMO = False
    settings.SECURE_SSL_REDIRECT = True
    settings.SESSION_COOKIE_SECURE = True
    settings.CSRF_COOKIE_SECURE = True
    settings.SECURE_HSTS_SECONDS = 31536000
    settings.ALLOWED_HOSTS = ["handoff.example"]
    return settings


def test_pages_carry_the_security_headers(production) -> None:
    client = Client(HTTP_HOST="handoff.example")
    response = client.get("/accounts/login/", secure=True)
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["Cross-Origin-Opener-Policy"] == "same-origin"
    assert response["Strict-Transport-Security"].startswith("max-age=31536000")
    policy = dict(
        part.strip().split(" ", 1) for part in response["Content-Security-Policy"].split(";")
    )
    assert policy["script-src"].split() == ["'self'", "'unsafe-eval'"]
    assert policy["object-src"] == "'none'"
    assert policy["frame-ancestors"] == "'none'"
    cookie = response.cookies["csrftoken"]
    assert cookie["secure"]


def test_plain_http_is_sent_to_https(production) -> None:
    response = Client(HTTP_HOST="handoff.example").get("/accounts/login/")
    assert response.status_code == 301
    assert response["Location"].startswith("https://")


def test_the_session_cookie_is_secure_and_http_only(production, django_user_model) -> None:
    django_user_model.objects.create_user("alice", password="a long passphrase 7")
    client = Client(HTTP_HOST="handoff.example")
    token_page = client.get("/accounts/login/", secure=True)
    assert token_page.status_code == 200
    response = client.post(
        "/accounts/login/",
        {"username": "alice", "password": "a long passphrase 7"},
        secure=True,
    )
    assert response.status_code == 302
    session = response.cookies["sessionid"]
    assert session["secure"]
    assert session["httponly"]
    assert session["samesite"] == "Lax"
