"""Settings of the adapter contract suite's Django server (see tests/adapters/contract_apps.py):
the shared test project, with the contract's routes and its `PACTMW` (brands included)."""

from __future__ import annotations

from pactmw_testsite.settings import *  # noqa: F403

ROOT_URLCONF = "pactmw_testsite.contract_urls"
