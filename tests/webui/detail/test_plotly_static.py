"""plotly.js is a static file of the installed package: found in DEBUG, collected for
production, never fetched from the internet."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.core.management import call_command

from webui.detail.plotlyjs import STATIC_PATH


def test_it_finds_plotly_js_in_the_installed_package() -> None:
    found = Path(finders.find(STATIC_PATH))
    assert found.name == "plotly.min.js"
    assert found.parent.name == "package_data"
    assert b"plotly" in found.read_bytes()[:2000].lower()


def test_it_collects_plotly_js_for_production(settings, tmp_path: Path) -> None:
    settings.STATIC_ROOT = str(tmp_path)
    call_command("collectstatic", interactive=False, verbosity=0)
    assert (tmp_path / STATIC_PATH).stat().st_size > 1_000_000


@pytest.mark.django_db
def test_it_serves_pages_that_load_no_script_from_elsewhere(client, settings) -> None:
    settings.HANDOFF_DEMO = True
    page = client.get("/clusters/x/fleet/").content.decode()
    assert "/static/webui/vendor/plotly.min.js" in page
    assert "https://" not in page
    assert "http://" not in page
