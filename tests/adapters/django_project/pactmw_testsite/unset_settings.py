"""Settings of tests/adapters/test_django_missing_setting.py: the contract site as a project
that installed pactmw's app and middleware but has not written its `PACTMW` yet."""

from __future__ import annotations

from pactmw_testsite.contract_settings import *  # noqa: F403

# mypy does not follow pactmw_testsite's star imports (pyproject.toml), so it sees no PACTMW.
del PACTMW  # type: ignore[name-defined]  # noqa: F821
