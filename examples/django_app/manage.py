#!/usr/bin/env python
"""Django's command-line utility for the shop, plus one convenience for the example.

`runserver` first applies migrations (quietly), so a fresh clone serves the seeded demo
orders without a manual `migrate`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
    # The repo root, after this directory: lets a TOML config name `examples.*` handlers.
    repo = str(Path(__file__).resolve().parent.parent.parent)
    if repo not in sys.path:
        sys.path.append(repo)
    from django.core.management import execute_from_command_line

    # Under the autoreloader the child process has RUN_MAIN=true: the parent already migrated.
    if sys.argv[1:2] == ["runserver"] and os.environ.get("RUN_MAIN") != "true":
        execute_from_command_line([sys.argv[0], "migrate", "--noinput", "--verbosity", "0"])
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
