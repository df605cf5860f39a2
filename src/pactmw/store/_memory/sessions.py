"""Poppy Sessions of the memory store (the contract, with its input checks:
store/_protocols/sessions.py)."""

from __future__ import annotations

from attrs import evolve

from pactmw.store._memory.core import MemoryCore
from pactmw.store._protocols.sessions import (
    PoppySession,
    SessionChange,
    SessionUpdate,
    change_session,
)

__all__ = ["SessionsMixin"]


class SessionsMixin(MemoryCore):
    """The Session operations, on `MemoryCore`'s Session dicts behind the one lock."""

    def _put_token(self, session: PoppySession, token_hash: str) -> None:
        # Called with the lock held: the Session's old token stops working.
        if token_hash in self._session_tokens:
            raise ValueError("Session Token hash is already stored")
        old = self._live_token.get(session.session_id)
        if old is not None:
            del self._session_tokens[old]
        self._session_tokens[token_hash] = session.session_id
        self._live_token[session.session_id] = token_hash
        self._sessions[session.session_id] = session

    def _insert_session(self, session: PoppySession, token_hash: str) -> None:
        with self._open:
            if session.session_id in self._sessions:
                raise ValueError("session_id is already stored")
            self._put_token(session, token_hash)

    def _change(self, update: SessionUpdate) -> SessionChange:
        with self._open:
            change = change_session(self._sessions.get(update.session_id), update)
            if change.session is not None:
                self._put_token(change.session, update.token_hash)
            return change

    def _get_session(self, session_id: str) -> PoppySession | None:
        with self._open:
            return self._sessions.get(session_id)

    def _session_for_token(self, token_hash: str) -> PoppySession | None:
        with self._open:
            session_id = self._session_tokens.get(token_hash)
            return None if session_id is None else self._sessions[session_id]

    def _sign_out_sessions(self, grant_id: str) -> int:
        with self._open:
            signed_in = [s for s in self._sessions.values() if s.grant_id == grant_id]
            for session in signed_in:
                self._sessions[session.session_id] = evolve(
                    session, account=None, grant_id=None, scopes=(), signed_in_at=None
                )
        return len(signed_in)

    def _session_clients(self, now: float) -> list[tuple[str, str]]:
        with self._open:
            return [
                (s.brand_id, s.client_id)
                for s in self._sessions.values()
                if now < s.token_expires_at
            ]
