"""Strict base64url and JSON: one spelling per value, nothing two parsers read differently."""

from __future__ import annotations

import base64
import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pactmw.core.encoding import (
    MAX_JSON_DEPTH,
    b64url_decode,
    b64url_encode,
    json_dumps,
    json_loads,
    loggable,
    printable,
    printable_json,
)
from pactmw.core.errors import MalformedInput

# -- base64url ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "text"),
    [
        (b"", ""),
        (b"\x00", "AA"),
        (b"\x01", "AQ"),
        (b"\xff\xff", "__8"),
        (b"\xfb\xff", "-_8"),
        (b"abc", "YWJj"),
        (b'{"alg":"ES256"}', "eyJhbGciOiJFUzI1NiJ9"),
    ],
)
def test_b64url_known_answers(data: bytes, text: str) -> None:
    assert b64url_encode(data) == text
    assert b64url_decode(text) == data
    assert b64url_decode(text.encode("ascii")) == data


@pytest.mark.parametrize("text", ["AQ==", "AQ=", "YWJjZA==", "YWJjZA=", "=", "YW=J"])
def test_b64url_padding_refused(text: str) -> None:
    with pytest.raises(MalformedInput):
        b64url_decode(text)


@pytest.mark.parametrize("text", ["+/8", "__+A", "ab/c", "a b", "ab\n", "YW\tJj", "Y.Jj", "é"])
def test_b64url_standard_alphabet_and_stray_characters_refused(text: str) -> None:
    with pytest.raises(MalformedInput):
        b64url_decode(text)


@pytest.mark.parametrize("text", ["A", "AAAAA", "YWJjZ", "_____"])
def test_b64url_impossible_length_refused(text: str) -> None:
    assert len(text) % 4 == 1
    with pytest.raises(MalformedInput):
        b64url_decode(text)


@pytest.mark.parametrize(
    ("canonical", "variant"),
    [
        ("AQ", "AR"),  # length % 4 == 2: low 4 bits of the last char must be zero
        ("AQ", "Af"),
        ("AA", "AP"),
        ("YWJjZA", "YWJjZB"),
        ("AAE", "AAF"),  # length % 4 == 3: low 2 bits must be zero
        ("AAE", "AAH"),
        ("__8", "__9"),
        ("__8", "___"),
    ],
)
def test_b64url_non_canonical_final_character_refused(canonical: str, variant: str) -> None:
    # The lenient stdlib decoder maps both spellings to the same bytes: that ambiguity is the bug
    # the strict decoder exists to prevent.
    lenient = base64.urlsafe_b64decode(variant + "=" * (-len(variant) % 4))
    assert lenient == b64url_decode(canonical)
    with pytest.raises(MalformedInput):
        b64url_decode(variant)


@given(st.binary(max_size=200))
def test_b64url_round_trip(data: bytes) -> None:
    text = b64url_encode(data)
    assert "=" not in text
    assert b64url_decode(text) == data


@given(st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/"))
def test_b64url_accepts_only_one_spelling_per_value(text: str) -> None:
    try:
        data = b64url_decode(text)
    except MalformedInput:
        return
    assert b64url_encode(data) == text


# -- JSON --------------------------------------------------------------------------------------


def test_json_round_trip_and_compact_form() -> None:
    value = {"b": [1, 2.5, None, True, False], "a": "é€😀", "n": {"x": ""}}
    encoded = json_dumps(value)
    assert encoded == '{"b":[1,2.5,null,true,false],"a":"é€😀","n":{"x":""}}'.encode()
    assert json_loads(encoded) == value
    assert json_loads(encoded.decode()) == value


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',
        '{"a":1,"a":1}',
        '{"x":{"b":1,"b":2}}',
        '[{"k":1,"k":null}]',
        # Deep inside objects and arrays, after members that repeat nothing.
        '{"a":[1,{"b":[{"c":{"d":1,"e":2,"d":3}}]}],"z":0}',
        '[[[[{"m":{"parts":[{"text":"x"},{"text":"y","text":"z"}]}}]]]]',
        # The same name spelled differently: escapes decode to the same key.
        '{"a":1,"\\u0061":2}',
        '{"\\u00e9":1,"é":2}',
        '{"\\ud83d\\ude00":1,"😀":2}',
        '{"a\\"b":1,"a\\u0022b":2}',
        '{"\\/":1,"/":2}',
        # Whitespace around the colon does not make a different member.
        '{"a" : 1 , "a":2}',
    ],
)
def test_json_duplicate_keys_refused(text: str) -> None:
    with pytest.raises(MalformedInput, match="duplicate"):
        json_loads(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # A repeated name in different objects, and a value equal to a name, are no duplicates.
        ('[{"text":"a"},{"text":"b"}]', [{"text": "a"}, {"text": "b"}]),
        ('{"a":"a","b":{"a":"b"}}', {"a": "a", "b": {"a": "b"}}),
        # Names that differ only after decoding are different names.
        ('{"a":1,"\\u0041":2}', {"a": 1, "A": 2}),
        ('{"e\\u0301":1,"é":2}', {"e\u0301": 1, "é": 2}),
    ],
)
def test_json_same_names_in_different_objects_are_not_duplicates(text: str, value: object) -> None:
    assert json_loads(text) == value


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "-Infinity", '{"exp":NaN}', "[1,Infinity]", '{"a":-Infinity}']
)
def test_json_nan_and_infinity_refused(text: str) -> None:
    with pytest.raises(MalformedInput):
        json_loads(text)


def test_json_nesting_limit() -> None:
    ok = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_loads(ok) is not None
    mixed_ok = '{"a":' * (MAX_JSON_DEPTH - 1) + "[]" + "}" * (MAX_JSON_DEPTH - 1)
    assert json_loads(mixed_ok) is not None
    too_deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(MalformedInput, match="deep"):
        json_loads(too_deep)
    with pytest.raises(MalformedInput):
        json_loads(too_deep.encode())


def test_json_very_deep_nesting_is_malformed_not_recursion_error() -> None:
    for text in ["[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1"]:
        with pytest.raises(MalformedInput):
            json_loads(text)


def test_json_brackets_inside_strings_do_not_count_as_nesting() -> None:
    text = '{"s":"' + "[{" * 100 + '\\"' + "[" * 50 + '"}'
    assert json_loads(text) == {"s": "[{" * 100 + '"' + "[" * 50}


@pytest.mark.parametrize(
    "data",
    [
        b'"\xff"',
        b'{"a":"\xc3"}',  # truncated sequence
        b'{"a":"\xc0\xaf"}',  # overlong encoding of "/"
        b'{"a":"\xed\xa0\x80"}',  # an encoded UTF-16 surrogate is not UTF-8 (RFC 3629 §3)
        b'{"a":"\xf4\x90\x80\x80"}',  # beyond U+10FFFF
    ],
)
def test_json_invalid_utf8_refused(data: bytes) -> None:
    with pytest.raises(MalformedInput):
        json_loads(data)


@pytest.mark.parametrize(
    "data",
    [
        '{"alg":"ES256"}'.encode("utf-16-le"),
        '{"alg":"ES256"}'.encode("utf-16"),  # with a BOM
        '{"alg":"ES256"}'.encode("utf-32"),
        b'\xef\xbb\xbf{"alg":"ES256"}',  # a UTF-8 BOM (RFC 8259 §8.1: MUST NOT add one)
    ],
)
def test_json_bytes_must_be_utf8_without_bom(data: bytes) -> None:
    # The docstring promises UTF-8; json.loads alone would sniff UTF-16/32 and strip a BOM, so a
    # JWS header encoded in UTF-16 would be read by us and refused by other JOSE libraries.
    with pytest.raises(MalformedInput):
        json_loads(data)


@pytest.mark.parametrize("digits", [4301, 5000, 100_000])
def test_json_huge_integer_is_malformed_input(digits: int) -> None:
    with pytest.raises(MalformedInput) as info:
        json_loads('{"exp":' + "9" * digits + "}")
    assert type(info.value) is MalformedInput


@pytest.mark.parametrize("text", ["", "{", '{"a":}', "[1,]", "{'a':1}", '{"a":1}x', "01"])
def test_json_bad_syntax_is_malformed_input(text: str) -> None:
    with pytest.raises(MalformedInput):
        json_loads(text)


def test_json_dumps_refuses_nan() -> None:
    with pytest.raises(ValueError):
        json_dumps({"x": float("nan")})
    with pytest.raises(ValueError):
        json_dumps([1e400])


def test_json_dumps_refuses_cycles_and_what_is_not_json() -> None:
    cycle: list[object] = [1]
    cycle.append({"again": cycle})
    with pytest.raises(ValueError, match="Circular reference"):
        json_dumps(cycle)
    with pytest.raises(TypeError):
        json_dumps({"x": object()})
    with pytest.raises(TypeError):
        json_dumps({1.5j: 1})


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'é\u2028\x00"\\',
        {"b": 1, "a": [True, None, 1.5, -0.0, 10**30]},
        {1: "int key", 2.5: "float key", None: "null key", False: "bool key"},
        [[], {}, "", 0],
    ],
)
def test_json_dumps_writes_what_the_standard_encoder_writes(value: object) -> None:
    expected = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert json_dumps(value) == expected.encode()


@given(st.binary(max_size=300))
def test_json_loads_only_raises_malformed_input(data: bytes) -> None:
    with contextlib.suppress(MalformedInput):
        json_loads(data)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (' {"a":1}', {"a": 1}),
        ('{"a":1} \n', {"a": 1}),
        ("\t[1, 2]\r\n", [1, 2]),
        ("7", 7),
        (' "x" ', "x"),
    ],
)
def test_json_whitespace_around_the_value_is_allowed(text: str, value: object) -> None:
    # The scanner runs alone only when the value fills the text; the rest takes decode's path.
    assert json_loads(text) == value


@pytest.mark.parametrize("text", ['{"a":1}{}', '{"a":1} 2', " ", '{"a":1},', "1 2"])
def test_json_data_after_the_value_is_refused(text: str) -> None:
    with pytest.raises(MalformedInput):
        json_loads(text)


@given(st.text(alphabet=' \t\n{}[]":,0123456789abe.-', max_size=40))
def test_json_loads_reads_what_the_standard_parser_reads(text: str) -> None:
    try:
        expected = json.loads(text)
    except (ValueError, RecursionError):
        with pytest.raises(MalformedInput):
            json_loads(text)
        return
    with contextlib.suppress(MalformedInput):  # a duplicate key: refused, not merged
        assert json_loads(text) == expected


def test_printable_escapes_control_characters_only() -> None:
    text = "Acme\x1b[31m\r\nCafé\x7f\x85\t"
    assert printable(text) == "Acme\\x1b[31m\\r\\nCafé\\x7f\\x85\\t"
    assert printable("Café ✓ 北京") == "Café ✓ 北京"


def test_printable_escapes_bidirectional_controls_but_not_marks() -> None:
    """An override or an isolate reorders what follows on a terminal that does bidi; the
    marks (U+200E, U+200F) carry no state and Hebrew or Arabic text keeps them."""
    assert printable("Acme\u202eexe.txt \u2066x\u2069") == "Acme\\u202eexe.txt \\u2066x\\u2069"
    assert printable("\u05e9\u05dc\u05d5\u05dd\u200f") == "\u05e9\u05dc\u05d5\u05dd\u200f"


def test_printable_json_is_the_same_document() -> None:
    document = {"name": "Acme\u202e\x9b2J\x7f", "lines": "a\nb\x1b", "text": "Café \\\x9b"}
    text = json.dumps(document, indent=2, ensure_ascii=False)
    shown = printable_json(text)
    assert json.loads(shown) == document
    # Nothing left that a terminal acts on but the indentation's line breaks.
    assert all(character == "\n" or printable(character) == character for character in shown)


def test_loggable_is_printable_and_cut_short_with_a_marker() -> None:
    assert loggable("https://pa.example") == "https://pa.example"  # ordinary: unchanged
    assert loggable("a\nb\x1b[8m") == "a\\nb\\x1b[8m"
    assert loggable("x" * 200) == "x" * 200
    assert loggable("\n" + "x" * 300) == "\\n" + "x" * 198 + "...(302 chars)"
    assert loggable(ValueError("bad\r")) == "bad\\r"
