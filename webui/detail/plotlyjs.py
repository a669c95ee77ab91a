"""plotly.js from the installed ``plotly`` package, as the static file
``webui/vendor/plotly.min.js``: found by runserver/Daphne through WhiteNoise's finder
support in DEBUG, and copied by ``collectstatic`` (hashed, cached forever) in production.
Nothing is fetched from the internet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_FILE = "plotly.min.js"
PREFIX = "webui/vendor"
STATIC_PATH = f"{PREFIX}/{PLOTLY_FILE}"


def package_data() -> Path:
    return Path(plotly.__file__).resolve().parent / "package_data"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(package_data()))
        self.storage.prefix = PREFIX

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> str | list[str]:
        if path != STATIC_PATH:
            return []
        found = str(package_data() / PLOTLY_FILE)
        return [found] if find_all or kwargs.get("all") else found

    def list(self, ignore_patterns: Any) -> Iterator[tuple[str, FileSystemStorage]]:
        yield PLOTLY_FILE, self.storage
