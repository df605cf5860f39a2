"""A Django site made as the Django guide (docs/getting-started/django.md) makes it: a
`django-admin startproject` with the guide's blocks, migrated, with a superuser; and running its
`manage.py` (commands, shell scripts, runserver). Shared by the admin tests and the browser's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.support.net import free_port
from tests.support.servers import REPO, process_server

#: The password of the superuser "ops" every site has.
PASSWORD = "admin-pw-for-tests"

GUIDE = REPO / "docs" / "getting-started" / "django.md"
KEYGEN = "pactmw keygen --out pactmw-signing.jwk"
# Test only, after the guide's settings: the agent the admin adds has its keys on a JWKS
# server on 127.0.0.1 (plain http), the operator opts in to message text with SHOW_TEXT, and
# the audit events reach the server's log.
TEST_SETTINGS = """
import os
PACTMW["allow_http_jwks_on_loopback"] = True
PACTMW["admin_show_message_text"] = os.environ.get("SHOW_TEXT") == "1"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"pactmw.audit": {"handlers": ["console"], "level": "INFO"}},
}
"""


def guide_block(label: str) -> str:
    """The ```python block that the guide marks `<!-- not-run: LABEL (...) -->`."""
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines):
        if line.startswith(f"<!-- not-run: {label} ("):
            assert lines[number + 1] == "```python", lines[number + 1]
            end = lines.index("```", number + 2)
            return "\n".join(lines[number + 2 : end]) + "\n"
    raise AssertionError(f"{GUIDE.name} has no block marked {label!r}")


def manage(site: Path, env: dict[str, str], *args: str) -> str:
    """`python manage.py ARGS` in `site`, which must succeed; its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stderr}"
    return done.stdout


def new_site(
    root: Path, settings_tail: str, urls_tail: str, modules: Mapping[str, str] | None = None
) -> dict[str, str]:
    """A `django-admin startproject mysite` in `root` with the guide's signing key and bot,
    `settings_tail` and `urls_tail` at the end of its settings and urls, `modules` (file name
    -> code) beside them in mysite/, migrated, and the superuser "ops"; the environment its
    `manage.py` runs with."""
    bin_dir = Path(sys.executable).parent
    subprocess.run(
        [str(bin_dir / "django-admin"), "startproject", "mysite", "."],
        cwd=root,
        check=True,
        timeout=60,
    )
    assert KEYGEN in GUIDE.read_text(encoding="utf-8")
    subprocess.run(
        [str(bin_dir / "pactmw"), *KEYGEN.split()[1:]],
        cwd=root,
        check=True,
        timeout=60,
        capture_output=True,
    )
    (root / "mysite" / "bot.py").write_text(guide_block("mysite/bot.py"))
    for name, code in (modules or {}).items():
        (root / "mysite" / name).write_text(code)
    for name, tail in (("settings.py", settings_tail), ("urls.py", urls_tail)):
        module = root / "mysite" / name
        module.write_text(module.read_text() + "\n" + tail)
    env = {**os.environ, "DJANGO_SUPERUSER_PASSWORD": PASSWORD}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    manage(root, env, "migrate", "--verbosity", "0")
    manage(
        root,
        env,
        "createsuperuser",
        "--noinput",
        "--username",
        "ops",
        "--email",
        "ops@shop.example",
    )
    return env


def runserver(site: Path, env: dict[str, str], name: str, port: int | None = None) -> Any:
    """(port, the `manage.py runserver` process context) of `site`, logging to NAME.log;
    `port` is the one to listen on (a free one when None), for settings that must name it."""
    port = port or free_port()
    argv = [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    return port, process_server(argv, port, env=env, cwd=site, log=site / f"{name}.log")


def shell(site: Path, env: dict[str, str], code: str) -> str:
    """`manage.py shell -c CODE` after a prelude binding `store` (the Provider's) and `now`."""
    prelude = "import time\nfrom pactmw.adapters.django import get_provider\n"
    prelude += "store = get_provider().store\nnow = time.time()\n"
    return manage(site, env, "shell", "-c", prelude + code)
