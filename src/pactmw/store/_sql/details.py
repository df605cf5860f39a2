"""Authorization details of the SQL stores (the contract, with its input checks:
store/_protocols/details.py)."""

from __future__ import annotations

import hashlib

from pactmw.store._sql.core import SqlCore

__all__ = ["DetailsMixin"]


class DetailsMixin(SqlCore):
    """The primitives of `AuthorizationDetailsStore`, over the dialect hooks."""

    def _add_authorization_details(
        self, owner: str, entries: tuple[str, ...], now: float, expires_at: float | None
    ) -> None:
        with self._write() as ex:
            ex.execute(self._sql.drop_expired_details, (now,))
            row = ex.execute(self._sql.last_detail_position, (owner,)).fetchone()
            position = int(row[0]) if row is not None and row[0] is not None else -1
            for text in entries:
                # Keyed by a digest: an entry can be longer than an index key may be.
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                position += 1
                ex.execute(self._sql.insert_detail, (owner, digest, position, text, expires_at))

    def _authorization_details(self, owner: str) -> tuple[str, ...]:
        with self._read() as ex:
            rows = ex.execute(self._sql.details_of, (owner,)).fetchall()
        return tuple(str(row[0]) for row in rows)
