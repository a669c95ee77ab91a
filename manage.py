#!/usr/bin/env python
"""Django's command-line utility for Handoff."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")
    from handoff.management.oneline import execute

    sys.exit(execute(sys.argv))


if __name__ == "__main__":
    main()
