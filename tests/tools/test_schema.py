"""The JSON Schema subset that checks model-written tool arguments (and authorization details)."""

from __future__ import annotations

from typing import Any

import pytest

from pactmw.provider._json_schema import check_schema, validate

ORDER = {
    "type": "object",
    "properties": {
        "order": {"type": "string", "pattern": "^[A-Z]-[0-9]{4}$"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
        "price": {"type": "number", "exclusiveMinimum": 0},
        "gift": {"type": "boolean"},
        "speed": {"enum": ["standard", "express"]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2},
        "note": {"type": ["string", "null"], "minLength": 2},
    },
    "required": ["order"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"order": "A-1001"}, None),
        ({"order": "A-1001", "quantity": 3, "price": 2.5, "gift": True, "note": None}, None),
        ({"order": "A-1001", "quantity": 3.0}, None),  # an integer is a number without fraction
        ({}, "order is required"),
        ({"order": 1001}, "order must be a string"),
        ({"order": "1001"}, "order must match the pattern ^[A-Z]-[0-9]{4}$"),
        ({"order": "A-1001", "quantity": 0}, "quantity must be at least 1"),
        ({"order": "A-1001", "quantity": 11}, "quantity must be at most 10"),
        ({"order": "A-1001", "quantity": 2.5}, "quantity must be an integer"),
        ({"order": "A-1001", "quantity": True}, "quantity must be an integer"),
        ({"order": "A-1001", "price": 0}, "price must be more than 0"),
        ({"order": "A-1001", "gift": 1}, "gift must be true or false"),
        ({"order": "A-1001", "speed": "slow"}, 'speed must be one of "standard", "express"'),
        ({"order": "A-1001", "tags": ["a", "b", "c"]}, "tags must have at most 2 items"),
        ({"order": "A-1001", "tags": ["toolong"]}, "tags[0] must be at most 5 characters long"),
        ({"order": "A-1001", "note": 5}, "note must be a string or null"),
        ({"order": "A-1001", "note": "x"}, "note must be at least 2 characters long"),
        ({"order": "A-1001", "coupon": "X"}, "coupon is not expected"),
        ({"order": "A-1001", "odd key": 1}, '"odd key" is not expected'),
        ([], "the value must be an object"),
    ],
)
def test_validate_names_the_first_problem(value: Any, problem: str | None) -> None:
    check_schema(ORDER)
    assert validate(value, ORDER) == problem


def test_nested_paths_any_of_const_unique_and_open_objects() -> None:
    schema = {
        "type": "object",
        "properties": {
            "lines": {
                "type": "array",
                "uniqueItems": True,
                "items": {
                    "type": "object",
                    "properties": {"sku": {"const": "S-1"}},
                    "additionalProperties": {"type": "integer"},
                },
            },
            "either": {"anyOf": [{"type": "string"}, {"type": "array", "minItems": 1}]},
        },
    }
    check_schema(schema)
    assert validate({"lines": [{"sku": "S-1", "n": 2}]}, schema) is None
    assert validate({"lines": [{"sku": "S-2"}]}, schema) == 'lines[0].sku must be "S-1"'
    assert validate({"lines": [{"n": "2"}]}, schema) == "lines[0].n must be an integer"
    assert validate({"lines": [{"n": 1}, {"n": 1.0}]}, schema) == "lines must not repeat an item"
    assert validate({"either": []}, schema) == "either matches none of the allowed shapes"
    assert validate({"either": "x"}, schema) is None
    # Members the schema does not name are allowed unless additionalProperties says no.
    assert validate({"anything": object()}, schema) is None


def test_huge_numbers_are_judged_without_overflow() -> None:
    schema = {"type": "integer", "maximum": 10}
    assert validate(10**400, schema) == "the value must be at most 10"
    assert validate(float("inf"), {"type": "integer"}) == "the value must be an integer"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"$ref": "#/x"}, "uses '$ref'"),
        ({"oneOf": [{"type": "string"}]}, "uses 'oneOf'"),
        ({"type": "text"}, "type must be one of"),
        ({"type": []}, "type must be one of"),
        ({"enum": []}, "enum must be a non-empty list"),
        ({"minLength": -1}, "minLength must be a non-negative integer"),
        ({"maxItems": True}, "maxItems must be a non-negative integer"),
        ({"minimum": "1"}, "minimum must be a number"),
        ({"pattern": "("}, "pattern is not a regular expression"),
        ({"uniqueItems": "yes"}, "uniqueItems must be true or false"),
        ({"anyOf": []}, "anyOf must be a non-empty list"),
        ({"items": {"format": "x", "if": {}}}, "schema.items uses 'if'"),
        ({"properties": []}, "properties must be an object"),
        ({"properties": {"a": {"not": {}}}}, "schema.properties.a uses 'not'"),
        ({"required": "a"}, "required must be a list"),
        ({"additionalProperties": {"dependentRequired": {}}}, "additionalProperties uses"),
        ([], "must be a JSON object"),
    ],
)
def test_check_schema_refuses_what_it_would_not_enforce(schema: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("$", r"\$").replace("(", r"\(")):
        check_schema(schema)


def test_annotations_are_accepted_and_never_checked() -> None:
    schema = {
        "type": "string",
        "title": "T",
        "description": "D",
        "default": "x",
        "examples": ["y"],
        "format": "email",
        "$comment": "c",
        "deprecated": False,
    }
    check_schema(schema)
    assert validate("not an email", schema) is None
