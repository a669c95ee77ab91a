#!/usr/bin/env python
"""Django's command-line utility for Handoff."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "handoff.settings")
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    from handoff.management.unreachable import UNREACHABLE, database_problem, explain

    try:
        execute_from_command_line(sys.argv)
    except UNREACHABLE as exc:
        # One line, whatever the command: the URL it tried and what to do.
        print(explain(exc), file=sys.stderr)
        sys.exit(1)
    except DatabaseError as exc:
        print(database_problem(exc), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
