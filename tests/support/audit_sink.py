"""Audit hooks the tests name in the `audit` setting ("tests.support.audit_sink:record"), as a
site names its own: `record` appends each event as one JSON line to the file that the
environment variable `PACTMW_TEST_AUDIT_FILE` names, so a test reads what a server process (or
a command) heard; `explode` fails as a hook whose database is down."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pactmw.provider import AuditEvent

__all__ = ["ENV", "NOT_CALLABLE", "explode", "read", "record", "record_later"]

#: The environment variable naming the file `record` appends to.
ENV = "PACTMW_TEST_AUDIT_FILE"
#: What an `audit` setting may name by mistake: importable, but no function.
NOT_CALLABLE = "the audit sink"


def record(event: AuditEvent) -> None:
    fields = {
        "name": event.name,
        "brand_id": event.brand_id,
        "issuer": event.issuer,
        "account": event.account,
        "grant_id": event.grant_id,
        "scopes": list(event.scopes),
        "reason": event.reason,
    }
    with open(os.environ[ENV], "a", encoding="utf-8") as sink:
        sink.write(json.dumps(fields) + "\n")


async def record_later(event: AuditEvent) -> None:
    """A hook written `async def`: called, it would only make a coroutine nobody awaits."""
    record(event)


def explode(event: AuditEvent) -> None:
    raise RuntimeError(f"the audit database is down ({event.name})")


def read(path: Path) -> list[dict[str, Any]]:
    """The events `record` wrote to `path`, in order (none when it wrote nothing)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
