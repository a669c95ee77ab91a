"""The triage board against the live path: the simulator running manual-scheduling, served
over the Kubernetes API, watched by a Celery worker, folded, pushed to Chromium."""

from __future__ import annotations

import re

from playwright.sync_api import expect

PODGC_BY = 150  # s after the simulator's start: ghost3 is created at 40 s, PodGC by 120 s


def _row(page, name: str):
    return page.locator(
        "tbody[data-rows] tr", has=page.locator("a[data-open]", has_text=re.compile(f"^{name}$"))
    )


def test_it_shows_rejections_and_a_typo_d_node_go_from_stuck_to_podgc_deleted_live(
    page, live_cluster, screenshot
):
    page.goto(live_cluster.board())
    expect(page.get_by_test_id("live")).to_have_text("live", timeout=15_000)
    page.evaluate("window.__same_page = true")  # gone if anything reloads the page

    bigcpu = _row(page, "bigcpu")
    expect(bigcpu.locator(".pill")).to_have_text("rejected", timeout=90_000)
    expect(bigcpu.locator(".reason")).to_have_text("OutOfcpu")

    ghost = _row(page, "ghost3")
    expect(ghost.locator(".pill")).to_have_text("stuck", timeout=110_000)
    expect(ghost.locator(".reason")).to_have_text("node-missing")
    expect(ghost.locator(".node .missing-tag")).to_be_visible()
    expect(ghost.get_by_test_id("countdown")).to_have_text(re.compile(r"PodGC (in|within) \d"))
    first = ghost.get_by_test_id("countdown").inner_text()
    page.wait_for_timeout(2100)
    assert ghost.get_by_test_id("countdown").inner_text() != first  # it counts down
    screenshot("stuck")

    remaining = max(10, PODGC_BY - live_cluster.elapsed())
    expect(ghost.locator(".pill")).to_have_text("podgc-deleted", timeout=remaining * 1000)
    expect(ghost.get_by_test_id("countdown")).to_have_count(0)
    assert page.evaluate("window.__same_page === true")
    # The counts follow (refreshed from the summary a moment after the update).
    expect(page.get_by_test_id("card-podgc-deleted").locator("[data-n]")).not_to_have_text("0")
    screenshot("podgc-deleted")


def test_it_keeps_filters_in_the_url_and_moves_with_the_keyboard(page, live_cluster, screenshot):
    page.goto(live_cluster.board("?verdict=all&namespace=kube-system"))
    expect(page.get_by_test_id("filter-namespace")).to_have_value("kube-system")
    expect(page.get_by_test_id("filter-verdict")).to_have_value("all")
    rows = page.locator("tbody[data-rows] tr")
    expect(rows.first).to_be_visible()
    assert set(page.locator("tbody[data-rows] .pod .ns").all_inner_texts()) == {"kube-system/"}

    page.get_by_test_id("filter-binding").select_option("static")
    expect(page).to_have_url(re.compile(r"binding=static"))
    assert "namespace=kube-system" in page.url
    # Wait for the filtered table: until it arrives the old rows (any binding) are shown.
    expect(rows.locator(".badge:not(.binding-static)")).to_have_count(0)
    expect(rows.locator(".badge")).not_to_have_count(0)
    assert set(rows.locator(".badge").all_inner_texts()) == {"static"}
    screenshot("static")

    page.go_back()
    expect(page.get_by_test_id("filter-binding")).to_have_value("")
    expect(page).not_to_have_url(re.compile(r"binding="))

    page.reload()  # a pasted link shows the same table
    expect(page.get_by_test_id("filter-namespace")).to_have_value("kube-system")

    page.keyboard.press("/")
    expect(page.get_by_test_id("filter-q")).to_be_focused()
    page.keyboard.type("coredns")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"q=coredns"))
    # Wait for the searched table: until it arrives the old rows are shown.
    expect(rows.filter(has_not_text="coredns")).to_have_count(0)
    expect(rows).not_to_have_count(0)
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    expect(rows.first).to_be_focused()
    # The focused row, not the first: a live update may re-sort the table meanwhile.
    name = page.locator("tbody[data-rows] tr:focus a[data-open]").inner_text()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(rf"/clusters/manual/pods/kube-system/{re.escape(name)}/$"))
