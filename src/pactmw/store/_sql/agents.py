"""The runtime agent registry and agent overrides of the SQL stores (the contract, with its
input checks: store/_protocols/agents.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pactmw.store._sql.core import SqlCore
from pactmw.store.base import StoredAgent

__all__ = ["AgentsMixin"]


def _agent(row: Sequence[Any]) -> StoredAgent:
    return StoredAgent(issuer=row[0], name=row[1], jwks_uri=row[2], added_at=float(row[3]))


class AgentsMixin(SqlCore):
    """The agent primitives of `AgentStore`, over the dialect hooks."""

    def _add_agent(self, agent: StoredAgent) -> bool:
        params = (agent.issuer, agent.name, agent.jwks_uri, agent.added_at)
        with self._write() as ex:
            return ex.execute(self._sql.insert_agent, params).rowcount > 0

    def _remove_agent(self, issuer: str) -> bool:
        with self._write() as ex:
            return ex.execute(self._sql.delete_agent, (issuer,)).rowcount > 0

    def _get_agent(self, issuer: str) -> StoredAgent | None:
        return self._read_one(self._sql.agent, (issuer,), _agent)

    def _list_agents(self) -> tuple[StoredAgent, ...]:
        with self._read() as ex:
            rows = ex.execute(self._sql.list_agents).fetchall()
        return tuple(_agent(row) for row in rows)

    def _lookup_agent(self, issuer: str) -> tuple[StoredAgent | None, bool | None]:
        # One statement: the agent's columns and the override, each NULL when there is none.
        with self._read() as ex:
            row = ex.execute(self._sql.lookup_agent, (issuer,)).fetchone()
        agent = None if row[0] is None else _agent(row)
        return agent, None if row[4] is None else bool(row[4])

    def _set_agent_enabled(self, issuer: str, enabled: bool) -> None:
        with self._write() as ex:
            ex.execute(self._sql.set_agent_enabled, (issuer, enabled))

    def _agent_enabled(self, issuer: str) -> bool | None:
        return self._read_one(self._sql.agent_enabled, (issuer,), lambda row: bool(row[0]))
