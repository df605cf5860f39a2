"""RFC 8785 JSON Canonicalization Scheme: the RFC's own examples are the tests."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pactmw.core.jcs import canonicalize

# RFC 8785 Appendix B: IEEE 754 bit patterns and their canonical serialisation.
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),  # minus zero
    ("0000000000000001", "5e-324"),  # min positive
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),  # max
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),  # 2^53
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),  # 2^68
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_appendix_b_numbers(bits: str, expected: str) -> None:
    assert canonicalize(_double(bits)) == expected.encode()
    assert canonicalize([_double(bits)]) == f"[{expected}]".encode()


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_appendix_b_nan_and_infinity_are_errors(bits: str) -> None:
    assert not math.isfinite(_double(bits))
    with pytest.raises(ValueError):
        canonicalize(_double(bits))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123e18, "123000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (1.5e-7, "1.5e-7"),
        (333333333.33333329, "333333333.3333333"),
        (-0.0, "0"),
        (0.0, "0"),
        (5e-324, "5e-324"),
        (1e30, "1e+30"),
        (4.50, "4.5"),
        (2e-3, "0.002"),
        (0.000000000000000000000000001, "1e-27"),
        (1.0, "1"),
        (-1.0, "-1"),
        (100.0, "100"),
        (0.1, "0.1"),
        (123.456, "123.456"),
        (1.2345e-5, "0.000012345"),
        (-1.5e300, "-1.5e+300"),
        (2.0**53, "9007199254740992"),
    ],
)
def test_number_serialisation(value: float, expected: str) -> None:
    assert canonicalize(value) == expected.encode()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-7, "-7"),
        (2**53, "9007199254740992"),
        (-(2**53), "-9007199254740992"),
        # Past 2^53 a JSON number is an IEEE double in JCS: it is serialised as one.
        (2**53 + 1, "9007199254740992"),
        (10**21, "1e+21"),
        (2**68, "295147905179352830000"),
    ],
)
def test_integers_serialise_as_ieee_doubles(value: int, expected: str) -> None:
    assert canonicalize(value) == expected.encode()


def test_section_3_2_2_example() -> None:
    # RFC 8785 §3.2.2: the input, parsed (its numbers are JSON text, parsed as doubles).
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], '
        '"string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/", '
        '"literals": [null, true, false]}'
    )
    parsed = json.loads(source)
    assert parsed["string"] == '€$\x0f\nA\'B"\\\\"/'
    expected = (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )
    assert canonicalize(parsed) == expected.encode("utf-8")


def test_section_3_2_3_sorting_by_utf16_code_units() -> None:
    source = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    expected = (
        '{"\\r":"Carriage Return",'
        '"1":"One",'
        '"\u0080":"Control",'
        '"\u00f6":"Latin Small Letter O With Diaeresis",'
        '"\u20ac":"Euro Sign",'
        '"\U0001f600":"Emoji: Grinning Face",'
        '"\ufb33":"Hebrew Letter Dalet With Dagesh"}'
    )
    result = canonicalize(source)
    assert result == expected.encode("utf-8")
    # The point of the example: U+1F600 (surrogates D83D DE00) sorts before U+FB33 in UTF-16,
    # though it sorts after it by code point.
    assert list(json.loads(result)) == [
        "\r",
        "1",
        "\u0080",
        "\u00f6",
        "\u20ac",
        "\U0001f600",
        "\ufb33",
    ]
    assert sorted(source)[-1] == "\U0001f600"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("\x00", '"\\u0000"'),
        ("\x01", '"\\u0001"'),
        ("\x07", '"\\u0007"'),
        ("\b", '"\\b"'),
        ("\t", '"\\t"'),
        ("\n", '"\\n"'),
        ("\x0b", '"\\u000b"'),
        ("\f", '"\\f"'),
        ("\r", '"\\r"'),
        ("\x0f", '"\\u000f"'),
        ("\x1f", '"\\u001f"'),
        (" ", '" "'),
        ('"', '"\\""'),
        ("\\", '"\\\\"'),
        ("/", '"/"'),
        ("\x7f", '"\x7f"'),  # DEL is not a control character in JSON
        ("\u0080", '"\u0080"'),
        ("\u2028\u2029", '"\u2028\u2029"'),
        ("é€😀", '"é€😀"'),
    ],
)
def test_string_escaping(text: str, expected: str) -> None:
    assert canonicalize(text) == expected.encode("utf-8")


def test_literals_arrays_and_nesting() -> None:
    value = {"b": [True, False, None, [], {}], "a": {"z": 1, "y": [1.5, "s"]}, "": 0}
    assert canonicalize(value) == b'{"":0,"a":{"y":[1.5,"s"],"z":1},"b":[true,false,null,[],{}]}'
    assert canonicalize((1, 2)) == b"[1,2]"


@pytest.mark.parametrize(
    "value",
    [
        "\ud800",  # a lone surrogate cannot be UTF-8
        {"\udc00": 1},
        {1: "x"},  # TypeError, not the AttributeError of calling .encode on an int
        {"a": {1, 2}},
        b"bytes",
        object(),
    ],
)
def test_values_json_cannot_carry_are_refused(value: Any) -> None:
    with pytest.raises((TypeError, ValueError)):
        canonicalize(value)


finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | finite_floats
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(finite_floats)
def test_numbers_round_trip_exactly(value: float) -> None:
    text = canonicalize(value).decode()
    assert float(text) == value or (value == 0 and float(text) == 0)
    assert "E" not in text
    assert not text.endswith(".0")


@given(json_values)
def test_canonical_form_is_idempotent_and_parses_back(value: Any) -> None:
    once = canonicalize(value)
    reparsed = json.loads(once)
    assert canonicalize(reparsed) == once
    # JCS numbers are IEEE doubles: "66383803676849460" is the double 6.638380367684946e16.
    assert json.loads(once, parse_int=float) == value
