"""Browser-test helpers for the detail pages: a signed-in user on a private site, and
reading Plotly's hover label."""

from __future__ import annotations

import os
import subprocess
import sys

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.conftest import BASE_DIR

PASSWORD = "detail-pages-pw-8341"


def make_user(database_url: str, username: str) -> None:
    """Create (or reset) a user in the served sites' database."""
    code = (
        "from django.contrib.auth.models import User;"
        f"u, _ = User.objects.get_or_create(username={username!r});"
        f"u.set_password({PASSWORD!r}); u.save()"
    )
    subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=BASE_DIR,
        env={**os.environ, "DATABASE_URL": database_url},
        check=True,
        timeout=120,
    )


def sign_in(page, site: str, username: str) -> None:
    page.goto(site + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("form.signin button[type=submit]")
    page.wait_for_load_state()


def hover_points(page, chart: str, wanted: str) -> str:
    """Move the mouse over each marker of a Plotly chart until a hover label contains
    ``wanted``; returns that label's text ('' when none does)."""
    points = page.locator(f"{chart} .scatterlayer .trace .points path")
    for index in range(points.count()):
        box = points.nth(index).bounding_box()
        if box is None:
            continue
        page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        label = page.locator(".hoverlayer .hovertext")
        try:
            label.first.wait_for(timeout=1500)
        except PlaywrightTimeout:  # no label for this point: try the next
            continue
        text = label.first.text_content() or ""
        if wanted in text:
            return text
        page.mouse.move(0, 0)
    return ""
