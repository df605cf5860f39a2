"""The runtime agent registry and agent overrides of the SQL stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pactmw.store._sql.core import SqlCore
from pactmw.store.base import AgentExists, StoredAgent, has_nul, reject_nul

__all__ = ["AgentsMixin"]


def _agent(row: Sequence[Any]) -> StoredAgent:
    return StoredAgent(issuer=row[0], name=row[1], jwks_uri=row[2], added_at=float(row[3]))


class AgentsMixin(SqlCore):
    """The agent operations of `Store`, over the dialect hooks."""

    def add_agent(self, *, issuer: str, name: str, jwks_uri: str, now: float) -> StoredAgent:
        """Store a runtime agent; `AgentExists` when the issuer is already stored."""
        reject_nul(issuer=issuer, name=name, jwks_uri=jwks_uri)
        with self._write() as ex:
            inserted = ex.execute(self._sql.insert_agent, (issuer, name, jwks_uri, now))
            if inserted.rowcount == 0:
                raise AgentExists(f"agent {issuer!r} is already stored")
        return StoredAgent(issuer=issuer, name=name, jwks_uri=jwks_uri, added_at=now)

    def remove_agent(self, issuer: str) -> bool:
        """Forget a runtime agent; True if one was stored."""
        if has_nul(issuer):
            return False
        with self._write() as ex:
            return ex.execute(self._sql.delete_agent, (issuer,)).rowcount > 0

    def get_agent(self, issuer: str) -> StoredAgent | None:
        """Return the runtime agent of `issuer`, or None."""
        if has_nul(issuer):
            return None
        with self._read() as ex:
            row = ex.execute(self._sql.agent, (issuer,)).fetchone()
        return None if row is None else _agent(row)

    def list_agents(self) -> tuple[StoredAgent, ...]:
        """Return every runtime agent, ordered by issuer."""
        with self._read() as ex:
            rows = ex.execute(self._sql.list_agents).fetchall()
        return tuple(_agent(row) for row in rows)

    def lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        """Return the runtime agent of `issuer` and its override, in one statement."""
        if has_nul(issuer):
            return None, None
        with self._read() as ex:
            row = ex.execute(self._sql.lookup_agent, (issuer,)).fetchone()
        agent = None if row[0] is None else _agent(row)
        return agent, None if row[4] is None else bool(row[4])

    def set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        """Persist an enable/disable override for `issuer`."""
        reject_nul(issuer=issuer)
        with self._write() as ex:
            ex.execute(self._sql.set_agent_enabled, (issuer, bool(enabled)))

    def agent_enabled(self, issuer: str) -> bool | None:
        """Return the override for `issuer`, or None when there is none."""
        if has_nul(issuer):
            return None
        with self._read() as ex:
            row = ex.execute(self._sql.agent_enabled, (issuer,)).fetchone()
        return None if row is None else bool(row[0])
