"""Authorization details of the SQL stores (see store/_protocols/details.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from pactmw.store._sql.core import SqlCore
from pactmw.store.base import has_nul, reject_nul

__all__ = ["DetailsMixin"]


class DetailsMixin(SqlCore):
    """`AuthorizationDetailsStore` over the dialect hooks."""

    def add_authorization_details(
        self, *, owner: str, entries: Sequence[str], now: float, expires_at: float | None
    ) -> None:
        """Add the entries `owner` does not hold yet; see `AuthorizationDetailsStore`."""
        reject_nul(owner=owner, **{f"entries[{i}]": e for i, e in enumerate(entries)})
        with self._write() as ex:
            ex.execute(self._sql.drop_expired_details, (now,))
            row = ex.execute(self._sql.last_detail_position, (owner,)).fetchone()
            position = int(row[0]) if row is not None and row[0] is not None else -1
            for text in entries:
                # Keyed by a digest: an entry can be longer than an index key may be.
                digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
                position += 1
                ex.execute(self._sql.insert_detail, (owner, digest, position, text, expires_at))

    def authorization_details(self, *, owner: str) -> tuple[str, ...]:
        """The entries `owner` holds, oldest first; see `AuthorizationDetailsStore`."""
        if has_nul(owner):
            return ()
        with self._read() as ex:
            rows = ex.execute(self._sql.details_of, (owner,)).fetchall()
        return tuple(str(row[0]) for row in rows)
