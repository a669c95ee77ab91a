"""The site in a real browser: demo mode signs in and says so; otherwise, sign in first."""

from playwright.sync_api import expect

SOCKET_CLOSE_CODE = """url => new Promise(resolve => {
  const socket = new WebSocket(url);
  socket.onopen = () => setTimeout(() => resolve("open"), 500);
  socket.onclose = event => resolve(event.code);
})"""


def test_it_signs_demo_visitors_in_and_shows_the_banner(page, demo_site, redis_client, screenshot):
    # redis_client empties the store: no clusters registered.
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(demo_site + "/")
    expect(page.get_by_test_id("demo-banner")).to_contain_text("read-only demo user")
    expect(page.get_by_test_id("no-clusters")).to_be_visible()
    expect(page.locator(".session .user")).to_have_text("demo")
    screenshot("light")
    # Nothing comes from the internet: every request stays on this site.
    assert requested
    assert all(url.startswith(demo_site) for url in requested), requested


def test_it_follows_the_dark_colour_scheme(page, demo_site, screenshot):
    page.emulate_media(color_scheme="dark")
    page.goto(demo_site + "/")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(17, 20, 24)"
    screenshot("dark")


def test_it_opens_the_cluster_socket_for_the_demo_user(page, demo_site):
    page.goto(demo_site + "/")
    socket_url = demo_site.replace("http", "ws") + "/ws/clusters/demo/"
    assert page.evaluate(SOCKET_CLOSE_CODE, socket_url) == "open"


def test_it_sends_visitors_to_sign_in_outside_demo_mode(page, private_site, screenshot):
    page.goto(private_site + "/")
    expect(page).to_have_url(private_site + "/accounts/login/?next=/")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    expect(page.get_by_test_id("demo-banner")).to_have_count(0)
    screenshot()


def test_it_closes_the_cluster_socket_for_anonymous_visitors(page, private_site):
    page.goto(private_site + "/accounts/login/")
    socket_url = private_site.replace("http", "ws") + "/ws/clusters/demo/"
    assert page.evaluate(SOCKET_CLOSE_CODE, socket_url) == 4401
