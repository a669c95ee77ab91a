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


def _banner(response) -> str:
    text = " ".join(response.content.decode().split())
    start = text.index('data-testid="demo-banner"')
    return text[start : text.index("</div>", start)]


def test_the_banner_calls_simulated_only_the_simulated_clusters(client, settings, redis_client):
    from handoff.live import clusters

    settings.HANDOFF_DEMO = True
    sim = clusters.ClusterConfig(
        name="demo",
        kind="kubeconfig",
        context="sim-demo",
        options={"server": "http://127.0.0.1:40001", "version": "v1.33.1-handoff-sim"},
    )
    clusters.register_cluster(redis_client, sim)
    assert "the clusters shown are simulated" in _banner(client.get("/"))
    prod = clusters.ClusterConfig(
        name="prod",
        kind="kubeconfig",
        context="prod",
        options={"server": "https://10.0.0.1:6443", "version": "v1.29.4"},
    )
    clusters.register_cluster(redis_client, prod)
    banner = _banner(client.get("/"))
    assert "the clusters shown are simulated" not in banner
    assert "simulated: demo; real, watched read-only: prod." in banner
    clusters.unregister_cluster(redis_client, "demo")
    banner = _banner(client.get("/"))
    assert "simulated" not in banner
    assert "the clusters shown are real, watched read-only" in banner
    clusters.register_cluster(
        redis_client, clusters.ClusterConfig("copy", "trace", trace="/x.jsonl")
    )
    banner = _banner(client.get("/"))
    assert "real, watched read-only: prod; replayed from recorded traces: copy" in banner
    # The board's title says what the cluster is, in words.
    board = " ".join(client.get("/clusters/prod/").content.decode().split())
    assert (
        'prod <span class="muted" data-testid="described">· kubeconfig · context prod · https://10.0.0.1:6443</span>'
        in board
    )
    clusters.register_cluster(redis_client, sim)
    board = " ".join(client.get("/clusters/demo/").content.decode().split())
    assert "· simulator · demo · http://127.0.0.1:40001</span>" in board


def test_every_kind_is_described_in_words():
    from handoff.live import clusters
    from webui.clusterdata import describe

    assert (
        describe(clusters.ClusterConfig("a", "simulator", scenario="steady"))
        == "simulator · steady"
    )
    trace = clusters.ClusterConfig("b", "trace", trace="/srv/traces/incident.jsonl.gz")
    assert describe(trace) == "trace · incident.jsonl.gz"
    incl = clusters.ClusterConfig("c", "in-cluster", options={"server": "https://10.96.0.1:443"})
    assert describe(incl) == "in-cluster service account · https://10.96.0.1:443"
