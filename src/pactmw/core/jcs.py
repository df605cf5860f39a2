"""RFC 8785 JSON Canonicalization Scheme (JCS).

Used where a hash or signature covers JSON that another implementation re-serialises
(Parafé `details_hash`, canonical receipts): both sides must produce the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _string(value: str) -> str:
    out = ['"']
    for char in value:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char < " ":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _number(value: float) -> str:
    """ECMAScript `Number.prototype.toString` for a double (RFC 8785 §3.2.2.3)."""
    if not math.isfinite(value):
        raise ValueError("JCS cannot represent NaN or Infinity")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    # repr() gives the shortest round-tripping digits, the same digits ECMAScript chooses.
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    all_digits = int_part + frac_part
    significant = all_digits.lstrip("0")
    leading_zeros = len(all_digits) - len(significant)
    digits = significant.rstrip("0") or "0"
    # n: the decimal exponent such that value = 0.digits × 10^n (ECMAScript's notation).
    n = len(int_part) - leading_zeros + (int(exp_text) if exp_text else 0)
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    exponent = n - 1
    exp_sign = "+" if exponent >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{sign}{head}e{exp_sign}{abs(exponent)}"


def _serialise(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, int):
        # JSON numbers are IEEE 754 doubles in JCS; integers beyond 2^53 lose precision there.
        out.append(str(value) if abs(value) <= 2**53 else _number(float(value)))
    elif isinstance(value, float):
        out.append(_number(value))
    elif isinstance(value, Mapping):
        out.append("{")
        # Property names sort by their UTF-16 code units (RFC 8785 §3.2.3).
        for index, key in enumerate(sorted(value, key=lambda k: str.encode(k, "utf-16-be"))):
            if not isinstance(key, str):
                raise TypeError("JSON object keys must be strings")
            if index:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _serialise(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _serialise(item, out)
        out.append("]")
    else:
        raise TypeError(f"cannot canonicalise {type(value).__name__}")


def canonicalize(value: Any) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value."""
    out: list[str] = []
    _serialise(value, out)
    return "".join(out).encode("utf-8")


__all__ = [
    "canonicalize",
]
