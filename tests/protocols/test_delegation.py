"""The shape of RFC 9396 `authorization_details`, one predicate for the delegation token's
claim, the client's token response and `pactmw check --authorization-details`."""

from __future__ import annotations

from typing import Any

import pytest

from pactmw.protocols.delegation import is_authorization_details


@pytest.mark.parametrize(
    "value",
    [[], [{"type": "a"}], [{"type": "a", "actions": ["x"]}, {"type": "b"}]],
)
def test_an_array_of_typed_objects_is_authorization_details(value: Any) -> None:
    assert is_authorization_details(value)


@pytest.mark.parametrize(
    "value",
    [
        None,
        {"type": "a"},  # one object, not an array
        "[]",
        [{"type": 1}],
        [{"actions": ["x"]}],  # no type
        [{"type": "a"}, "b"],
        [["type", "a"]],
    ],
)
def test_anything_else_is_not(value: Any) -> None:
    assert not is_authorization_details(value)
