"""`RowReader` (store/_sql/rows.py): a stored value read from its row by its fields' types.

The contract suites read every value through it on sqlite, PostgreSQL and Django; these
cases pin what each column type becomes, whatever numeric type a driver hands back.
"""

from __future__ import annotations

import json
from decimal import Decimal

from pactmw.store._decisions import RefreshTokenState
from pactmw.store._protocols.operations import StoredOperation
from pactmw.store._protocols.sessions import PoppySession
from pactmw.store._sql.rows import CONVERSATION_ROW, DEVICE_ROW, GRANT_ROW, RowReader
from pactmw.store.base import Conversation


def decode(value: str) -> tuple[str, ...]:
    return tuple(json.loads(value))


def test_numbers_read_as_their_field_types_and_none_stays_none() -> None:
    row = ("ctx", "shop", "iss", "sub", 1, Decimal("2.5"), 0, None)
    conversation = CONVERSATION_ROW.read(row)
    assert conversation == Conversation("ctx", "shop", "iss", "sub", 1.0, 2.5, False, None)
    assert type(conversation.created_at) is float
    assert type(conversation.closed) is bool


def test_scope_lists_go_through_the_dialects_decoder() -> None:
    row = ("s", "b", "c", "u", "j", 1, 2, "alice", "g", '["a", "b"]', "alice", 3)
    session = RowReader.of(PoppySession).read(row, decode)
    assert session.scopes == ("a", "b")
    assert session.signed_in_at == 3.0


def test_a_join_may_add_columns_after_the_values() -> None:
    row = ("g", "c", "b", "user", 10, None, b"sealed", "the grant's account")
    token = RowReader.of(RefreshTokenState).read(row)
    assert token == RefreshTokenState("g", "c", "b", "user", 10.0, None, b"sealed")


def test_optional_integers_and_flags() -> None:
    reader = RowReader.of(StoredOperation)
    base = ["op", "b", "c", "u", None, "act", 1, "proposed", "sum", None, "[]", 1, None, None]
    times = [1, 2, 3]
    unconfirmed = reader.read([*base, *times, None, None, None, None, None], decode)
    assert (unconfirmed.revision, unconfirmed.confirmed_revision) == (1, None)
    assert unconfirmed.user_approval_required is True
    confirmed = reader.read([*base, *times, 2, "alice", 4, None, None], decode)
    assert (confirmed.confirmed_revision, confirmed.confirmed_at) == (2, 4.0)


def test_column_lists_follow_the_fields_with_renamed_columns() -> None:
    assert GRANT_ROW.columns().startswith("grant_id, brand_id, account, client_id, pa_sub")
    device_columns = DEVICE_ROW.columns(interval="interval_seconds").split(", ")
    assert device_columns[8] == "interval_seconds"
    assert "interval" not in device_columns
