"""The replay pages in Chromium: upload a trace, move through time, the views follow."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs, urlparse

import pytest

from tests.webui.detail.sites import make_user, sign_in
from tests.webui.detail.tracedata import HOSTILE, TRACES, hostile_trace

USER = "rita"


@pytest.fixture(scope="module")
def replay_site(
    serve: Callable[..., str], site_database: str, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The site outside demo mode, with the test traces as its server-side folder and a
    1 MB upload limit."""
    uploads = tmp_path_factory.mktemp("uploads")
    make_user(site_database, USER)
    return serve(
        HANDOFF_DEMO="0",
        HANDOFF_REPLAY_DIR=str(TRACES),
        HANDOFF_REPLAY_UPLOAD_DIR=str(uploads),
        HANDOFF_REPLAY_MAX_UPLOAD_MB="1",
    )


def upload(page, site: str, path) -> None:
    page.goto(site + "/replay/")
    page.set_input_files('[data-testid="upload-form"] input[type=file]', str(path))
    page.click('[data-testid="upload-form"] button[type=submit]')
    page.wait_for_load_state()


def at_of(url: str) -> str:
    return parse_qs(urlparse(url).query)["at"][0]


def move_slider(page, at: str) -> None:
    """Set the slider to a time as a user's drag ends: input, then change."""
    page.evaluate(
        """(at) => {
          const bar = document.getElementById("replay-bar");
          const slider = bar.querySelector("[data-replay-slider]");
          slider.value = String(new Date(at).getTime() - new Date(bar.dataset.start).getTime());
          slider.dispatchEvent(new Event("input"));
          slider.dispatchEvent(new Event("change"));
        }""",
        at,
    )


def rows(page) -> list[str]:
    return page.locator("#replay-board [data-rows] tr").all_inner_texts()


def wait_rows(page, count: int) -> None:
    page.wait_for_function(
        "n => document.querySelectorAll('#replay-board [data-rows] tr').length === n", arg=count
    )


def test_it_replays_an_uploaded_trace_through_time(page, replay_site: str, screenshot) -> None:
    sign_in(page, replay_site, USER)
    page.goto(replay_site + "/replay/")
    assert "stuck-node-missing.jsonl" in page.inner_text('[data-testid="server-traces"]')
    screenshot("index")
    upload(page, replay_site, TRACES / "stuck-node-missing.jsonl")
    assert "/replay/u-" in page.url
    assert at_of(page.url).startswith("2026-03-01T12:30:26")
    # The triage board (board.js) on the trace: needing attention first, then all verdicts.
    wait_rows(page, 1)
    assert "ghost5" in rows(page)[0]
    page.select_option('#replay-board select[name="verdict"]', "all")
    wait_rows(page, 2)
    assert "verdict=all" in page.url
    assert page.inner_text('[data-testid="card-running"] [data-n]') == "1"
    screenshot("end")

    # Back to 12:30:02: only ghost5 existed, waiting for a kubelet on a missing node.
    move_slider(page, "2026-03-01T12:30:02Z")
    wait_rows(page, 1)
    assert at_of(page.url).startswith("2026-03-01T12:30:02")
    assert "verdict=all" in page.url
    assert "ghost5" in rows(page)[0]
    assert "awaiting-kubelet" in rows(page)[0]
    page.wait_for_function(
        "() => document.querySelector('[data-testid=card-running] [data-n]').textContent === '0'"
    )
    screenshot("early")

    # The pod page at that time, from the board's link; the time travels in the URL.
    page.click('#replay-board [data-rows] a:has-text("ghost5")')
    page.wait_for_selector("#pod-root[data-loaded]")
    assert at_of(page.url).startswith("2026-03-01T12:30:02")
    assert page.get_attribute("#pod-root", "data-loaded") == "awaiting-kubelet"
    assert page.locator("#pod-chart .barlayer .trace").count() >= 1
    screenshot("pod")

    # A pasted link with a later time opens that picture: the kubelet never came.
    page.goto(page.url.split("?")[0] + "?at=2026-03-01T12:31:30Z")
    page.wait_for_selector("#pod-root[data-loaded]")
    assert page.get_attribute("#pod-root", "data-loaded") == "stuck"


def test_it_plays_forward(page, replay_site: str) -> None:
    sign_in(page, replay_site, USER)
    page.goto(
        replay_site + "/replay/f-stuck-node-missing.jsonl/?at=2026-03-01T12:30:00Z&verdict=all"
    )
    page.wait_for_selector("#replay-board [data-empty]:not([hidden])")
    assert rows(page) == []
    page.select_option("[data-replay-speed]", "1")
    page.click("[data-replay-play]")
    page.wait_for_function("() => !location.search.includes('12:30:00')", timeout=10_000)
    page.wait_for_function(
        "() => document.querySelectorAll('#replay-board [data-rows] tr').length > 0",
        timeout=15_000,
    )
    page.click("[data-replay-play]")
    assert page.get_attribute("[data-replay-play]", "aria-pressed") == "false"


def test_it_follows_the_time_on_fleet_and_nodes(page, replay_site: str, screenshot) -> None:
    sign_in(page, replay_site, USER)
    base = replay_site + "/replay/f-stuck-node-missing.jsonl"
    page.goto(base + "/nodes/?at=2026-03-01T12:30:02Z")
    page.wait_for_selector("#nodes-root[data-loaded]")
    assert "default/ghost5" in page.inner_text('[data-testid="missing"]')
    screenshot("nodes")
    page.goto(base + "/fleet/?at=2026-03-01T12:30:02Z")
    page.wait_for_selector("#fleet-root[data-loaded]")
    assert page.get_attribute("#fleet-root", "data-loaded") == "1"
    before = page.get_attribute("#fleet-root", "data-loaded")
    move_slider(page, "2026-03-01T12:30:26.9Z")
    page.wait_for_function(
        "b => document.getElementById('fleet-root').dataset.loaded !== b", arg=before
    )
    assert page.get_attribute("#fleet-root", "data-loaded") == "2"
    screenshot("fleet")


def test_it_enforces_the_upload_limit(page, replay_site: str, tmp_path) -> None:
    sign_in(page, replay_site, USER)
    line = (TRACES / "stuck-node-missing.jsonl").read_bytes()
    big = tmp_path / "big.jsonl"
    big.write_bytes(line * (2_000_000 // len(line) + 1))
    assert big.stat().st_size > 1024 * 1024
    page.goto(replay_site + "/replay/")
    page.set_input_files('[data-testid="upload-form"] input[type=file]', str(big))
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.click('[data-testid="upload-form"] button[type=submit]')
    assert answer.value.status == 413
    assert "1 MB limit" in page.inner_text('[data-testid="replay-error"]')


def test_it_refuses_a_file_that_is_not_a_trace(page, replay_site: str, tmp_path) -> None:
    sign_in(page, replay_site, USER)
    junk = tmp_path / "notes.jsonl"
    junk.write_text("just some notes\n")
    upload(page, replay_site, junk)
    assert "not a Handoff trace" in page.inner_text('[data-testid="replay-error"]')


def test_it_shows_hostile_strings_as_text(page, replay_site: str, tmp_path) -> None:
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sign_in(page, replay_site, USER)
    upload(page, replay_site, hostile_trace(tmp_path / "hostile.jsonl"))
    page.click('#replay-board [data-rows] a:has-text("bigcpu")')
    page.wait_for_selector("#pod-root[data-loaded]")
    assert HOSTILE in page.locator('[data-testid="events"] tbody').inner_text()
    assert page.locator("img").count() == 0
    assert dialogs == []


def test_it_refuses_anonymous_visitors(page, replay_site: str) -> None:
    page.goto(replay_site + "/replay/f-stuck-node-missing.jsonl/")
    assert "/accounts/login/" in page.url
    response = page.request.get(replay_site + "/api/replay/f-stuck-node-missing.jsonl/summary")
    assert response.status == 401


def test_a_replay_shows_the_owners_as_they_were_then(page, replay_site: str, tmp_path) -> None:
    """The replay board takes owners from its summary at the chosen time: the loop of the
    pinned Deployment has three endings by 3 minutes in, five at the end."""
    from tests.core.ownershapes import write_trace

    sign_in(page, replay_site, USER)
    upload(page, replay_site, write_trace(tmp_path / "owners.jsonl"))
    loop = page.get_by_test_id("loop")
    page.wait_for_function("() => document.querySelectorAll('[data-testid=loop]').length === 1")
    assert "5 pods podgc-deleted (orphaned)" in loop.inner_text()
    assert page.get_by_test_id("failing-owner").count() == 2

    move_slider(page, "2026-05-28T20:30:00Z")  # T0 + 200 s (tests/core/k8sshapes.py)
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=loop]') || {}).textContent?.includes('3 pods')"
    )
    page.check('#replay-board [data-testid="group-owner"]')
    page.wait_for_selector('#replay-board tr.group[data-group="Deployment/default/web"]')
