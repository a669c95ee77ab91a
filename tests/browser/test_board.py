"""The triage board in Chromium against store-written pods: resuming after a dropped
websocket, hostile strings shown as text, sign-in required, the cluster list, themes.

These tests write to the session's redis through a client of their own under cluster
names of their own, and never empty it (the live cluster has a redis of its own).
"""

from __future__ import annotations

import re

import pytest
import redis
from playwright.sync_api import expect

from handoff.live import clusters, store
from handoff.live.push import Publisher
from tests.webui.pods import FoldWriter, make_views, template

HOSTILE = "<img src=x onerror=alert(1)>"


@pytest.fixture
def store_client(redis_url: str):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def _cluster(client: redis.Redis, name: str, count: int = 12) -> tuple[FoldWriter, list[dict]]:
    store.forget_cluster(client, name)
    clusters.register_cluster(client, clusters.ClusterConfig(name=name, kind="trace"))
    views = list(make_views(template(client), count, seed=len(name)).values())
    for view in views:
        view["verdict"] = "awaiting-kubelet"
    writer = FoldWriter(client, name)
    writer.flush(views)
    return writer, views


def _row(page, uid: str):
    return page.locator(f'tbody[data-rows] tr[data-uid="{uid}"]')


def test_a_dropped_websocket_reconnects_and_resumes_from_its_cursor(
    page, demo_site, store_client, screenshot
):
    writer, views = _cluster(store_client, "resume-board")
    held = writer.cursor
    sockets, state = [], {"blocked": False}

    def route(ws) -> None:
        sockets.append(ws)
        if state["blocked"]:
            ws.close(code=1011)
        else:
            ws.connect_to_server()

    page.route_web_socket(re.compile(r".*/ws/clusters/resume-board/.*"), route)
    page.goto(f"{demo_site}/clusters/resume-board/")
    expect(page.get_by_test_id("live")).to_have_text("live")
    page.evaluate("window.__same_page = true")
    assert f"cursor={held}" in sockets[0].url  # the page's own cursor, from its first read

    state["blocked"] = True
    sockets[0].close()
    expect(page.get_by_test_id("live")).to_have_text("reconnecting…")
    # While it is away: one pod turns stuck, another is removed, a new one appears.
    changed, removed = views[3], views[5]
    changed["verdict"], changed["reason"] = "stuck", "kubelet-silent"
    newcomer = {**views[0], "uid": "f" * 32, "name": "newcomer", "verdict": "rejected"}
    writer.flush([changed, newcomer], [removed["uid"]])
    expect(_row(page, removed["uid"])).to_have_count(1)  # nothing arrives while away
    state["blocked"] = False

    expect(page.get_by_test_id("live")).to_have_text("live", timeout=20_000)
    expect(_row(page, changed["uid"]).locator(".pill")).to_have_text("stuck")
    expect(_row(page, changed["uid"])).to_have_class(re.compile(r"\bflash\b"))
    expect(_row(page, removed["uid"])).to_have_count(0)
    expect(_row(page, newcomer["uid"]).locator(".pill")).to_have_text("rejected")
    # Worst first: the stuck pod now leads the table.
    expect(page.locator("tbody[data-rows] tr").first).to_have_attribute("data-uid", changed["uid"])
    assert f"cursor={held}" in sockets[-1].url
    assert page.evaluate("window.__same_page === true")
    screenshot()


def test_it_shows_hostile_strings_as_text_from_the_page_and_the_socket(
    page, demo_site, store_client, screenshot
):
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    writer, views = _cluster(store_client, "hostile-board")
    first = views[0]
    first.update(name=HOSTILE, namespace=HOSTILE, node=HOSTILE, node_exists=False, reason=HOSTILE)
    writer.flush([first])
    page.goto(f"{demo_site}/clusters/hostile-board/?q=" + HOSTILE.replace(" ", "%20"))
    row = _row(page, first["uid"])
    expect(row.locator("a[data-open]")).to_have_text(HOSTILE)
    expect(row.locator(".reason")).to_have_text(HOSTILE)
    expect(page.get_by_test_id("filter-q")).to_have_value(HOSTILE)

    # And arriving live, through the fold's publisher and the channel layer.
    page.goto(f"{demo_site}/clusters/hostile-board/")
    expect(page.get_by_test_id("live")).to_have_text("live")
    pushed = {**views[1], "name": f"x{HOSTILE}", "reason": HOSTILE, "verdict": "stuck"}
    cursor = writer.flush([pushed])
    publisher = Publisher("hostile-board")
    publisher.publish(
        {
            "type": "cluster.update",
            "data": {
                "cursor": cursor,
                "pods": [pushed],
                "removed": [],
                "more": False,
                "evaluated_at": "2026-01-01T00:00:00.000000Z",
            },
        }
    )
    publisher.close()
    expect(_row(page, pushed["uid"]).locator("a[data-open]")).to_have_text(f"x{HOSTILE}")
    expect(_row(page, pushed["uid"]).locator(".pill")).to_have_text("stuck")
    assert page.locator("tbody[data-rows] img").count() == 0
    assert dialogs == []
    screenshot()


def test_it_refuses_anonymous_visitors_outside_demo_mode(page, private_site, store_client):
    _cluster(store_client, "private-board")
    page.goto(f"{private_site}/clusters/private-board/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/clusters/private-board/"))
    for path in (
        "/api/clusters",
        "/api/clusters/private-board/pods",
        "/api/clusters/private-board/summary",
    ):
        response = page.request.get(private_site + path)
        assert response.status == 401
        assert response.json() == {"error": "authentication required"}
    code = page.evaluate(
        """url => new Promise(resolve => {
             const socket = new WebSocket(url);
             socket.onmessage = () => resolve("data");
             socket.onclose = event => resolve(event.code);
           })""",
        private_site.replace("http", "ws") + "/ws/clusters/private-board/?cursor=1-0",
    )
    assert code == 4401


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_it_lists_clusters_and_pages_through_the_board(
    page, demo_site, store_client, screenshot, scheme
):
    _cluster(store_client, "paged-board", count=260)
    page.emulate_media(color_scheme=scheme)
    page.goto(demo_site + "/")
    link = page.get_by_test_id("clusters").get_by_role("link", name="paged-board", exact=True)
    expect(link).to_be_visible()
    screenshot("clusters")
    link.click()
    rows = page.locator("tbody[data-rows] tr")
    expect(rows).to_have_count(100)
    expect(page.get_by_test_id("count")).to_have_text("260 match · 100 shown")
    page.get_by_role("button", name="Load more").click()
    expect(rows).to_have_count(200)
    page.get_by_role("button", name="Load more").click()
    expect(rows).to_have_count(260)
    expect(page.get_by_role("button", name="Load more")).to_be_hidden()
    assert len(set(rows.evaluate_all("rows => rows.map(r => r.dataset.uid)"))) == 260
    screenshot("board")
    page.get_by_test_id("card-running").click()
    expect(page).to_have_url(re.compile(r"verdict=running"))
    expect(page.locator("[data-empty]")).to_be_visible()


def test_live_rows_keep_the_scroll_position_and_the_filters(page, demo_site, store_client):
    writer, views = _cluster(store_client, "scroll-board", count=150)
    page.set_viewport_size({"width": 1280, "height": 500})
    page.goto(f"{demo_site}/clusters/scroll-board/?namespace=ns-3")
    expect(page.get_by_test_id("live")).to_have_text("live")
    rows = page.locator("tbody[data-rows] tr")
    shown = [x for x in views if x["namespace"] == "ns-3"]
    expect(rows).to_have_count(len(shown))
    anchor = rows.nth(len(shown) - 1)
    anchor.scroll_into_view_if_needed()
    top = anchor.bounding_box()["y"]
    # Above the viewport: a pod of ns-3 turns stuck, so it moves to the top, and a new one
    # of ns-3 appears there; a stuck pod of another namespace must not show at all.
    moved = {**shown[len(shown) // 2], "verdict": "stuck", "reason": "kubelet-silent"}
    fresh = {**shown[0], "uid": "e" * 32, "name": "fresh", "verdict": "stuck"}
    other = next(x for x in views if x["namespace"] != "ns-3")
    other = {**other, "verdict": "stuck"}
    cursor = writer.flush([moved, fresh, other])
    publisher = Publisher("scroll-board")
    data = {
        "cursor": cursor,
        "pods": [moved, fresh, other],
        "removed": [],
        "more": False,
        "evaluated_at": "2026-01-02T00:00:00.000000Z",
    }
    publisher.publish({"type": "cluster.update", "data": data})
    publisher.close()
    expect(_row(page, fresh["uid"])).to_have_count(1)
    expect(rows).to_have_count(len(shown) + 1)
    leader = min((moved, fresh), key=lambda x: (x["milestones"]["created"], x["uid"]))
    expect(rows.first).to_have_attribute("data-uid", leader["uid"])
    expect(_row(page, other["uid"])).to_have_count(0)
    assert abs(anchor.bounding_box()["y"] - top) < 2  # the row under the eye stayed put
    assert "namespace=ns-3" in page.url


def test_the_keyboard_keeps_its_place_through_live_updates(page, demo_site, store_client):
    writer, views = _cluster(store_client, "focus-board")
    page.goto(f"{demo_site}/clusters/focus-board/")
    expect(page.get_by_test_id("live")).to_have_text("live")
    rows = page.locator("tbody[data-rows] tr")
    expect(rows).to_have_count(len(views))
    for _ in range(3):
        page.keyboard.press("j")
    uid = rows.nth(2).get_attribute("data-uid")
    expect(_row(page, uid)).to_be_focused()
    view = next(x for x in views if x["uid"] == uid)

    # The pod under the keyboard turns stuck: its row is redrawn and moves to the top.
    moved = {**view, "verdict": "stuck", "reason": "kubelet-silent"}
    cursor = writer.flush([moved])
    publisher = Publisher("focus-board")
    data = {"cursor": cursor, "pods": [moved], "removed": [], "more": False}
    publisher.publish({"type": "cluster.update", "data": data})
    expect(rows.first).to_have_attribute("data-uid", uid)
    expect(_row(page, uid)).to_be_focused()
    page.keyboard.press("j")  # and the keyboard goes on from where the row now is
    expect(rows.nth(1)).to_be_focused()

    # Reloading the whole table (after a burst too big to list) keeps it too.
    uid = rows.nth(1).get_attribute("data-uid")
    page.evaluate("window.__same_page = true")
    rows.evaluate_all("all => all.forEach(tr => tr.dataset.old = 1)")
    refresh = {"cursor": cursor, "pods": [], "removed": [], "more": False, "refresh": True}
    publisher.publish({"type": "cluster.update", "data": refresh})
    expect(page.locator("tbody[data-rows] tr[data-old]")).to_have_count(0)  # all redrawn
    expect(rows).to_have_count(len(views))
    expect(_row(page, uid)).to_be_focused()
    assert page.evaluate("window.__same_page === true")

    # The focused pod goes: the keyboard moves to the row that takes its place.
    following = rows.nth(2).get_attribute("data-uid")
    cursor = writer.flush([], [uid])
    gone = {"cursor": cursor, "pods": [], "removed": [uid], "more": False}
    publisher.publish({"type": "cluster.update", "data": gone})
    publisher.close()
    expect(_row(page, uid)).to_have_count(0)
    expect(_row(page, following)).to_be_focused()
