"""Strict base64url and JSON, as every token parser in pactmw needs them.

Both are stricter than the standard library on purpose: a token that two parsers would read
differently (padding, stray characters, duplicate JSON keys, NaN) is refused rather than
interpreted.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import ssl
import time
from collections.abc import Callable
from json.encoder import c_make_encoder as _c_make_encoder  # type: ignore[attr-defined]
from json.encoder import encode_basestring as _encode_basestring
from typing import Any

from pactmw.core.errors import MalformedInput

# Characters whose unused low bits are zero, for the last character of an unpadded segment:
# any other final character encodes non-zero trailing bits, so two spellings would decode to
# the same bytes. Refusing them keeps one spelling per value.
_LAST_CHAR_2 = frozenset(b"AQgw")  # length % 4 == 2: the low 4 bits must be zero
_LAST_CHAR_3 = frozenset(b"AEIMQUYcgkosw048")  # length % 4 == 3: the low 2 bits must be zero

#: NUL and lone surrogates (`"\\u0000"`, `"\\ud800"` in JSON) are valid JSON strings but not
#: text that a database can store or UTF-8 can encode: identifiers and text carrying them are
#: refused at the door, so they never surface as a 500 deep in a store.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: Unicode's explicit bidirectional formatting characters (UAX #9 §2.1-2.2): embeddings,
#: overrides, isolates and the pops ending them. The marks (U+200E, U+200F, U+061C) are not
#: among them: they carry no state, so an isolated label keeps them to itself.
_BIDI_CONTROLS = "\u202a-\u202e\u2066-\u2069"
_BIDI_CONTROL = re.compile(f"[{_BIDI_CONTROLS}]")

#: RFC 6749 §3.3 scope-token: printable ASCII except space, `"` and `\\`.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")

_URLSAFE_TO_STANDARD = bytes.maketrans(b"-_", b"+/")
#: The padding `a2b_base64` wants, by the unpadded length modulo 4 (1 is refused before).
_PADDING = (b"", b"", b"==", b"=")
#: The base64url alphabet, for `bytes.translate(None, ...)`: what is left is not base64url.
B64URL_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _compact_jws_table() -> bytes:
    table = bytearray(b"!" * 256)  # "!" is in no base64 alphabet: it marks what is refused
    for byte in B64URL_ALPHABET + b".":
        table[byte] = byte
    table[ord("-")], table[ord("_")] = ord("+"), ord("/")
    return bytes(table)


#: For `bytes.translate`: the base64url alphabet to the standard one, "." kept, every other
#: byte to "!". One pass over a compact JWS both vets its characters (no "!" may be left) and
#: prepares its segments for `b64_decode_translated`.
COMPACT_JWS_TO_STANDARD = _compact_jws_table()

#: JSON nesting deeper than this is refused before the C parser could recurse too deep.
MAX_JSON_DEPTH = 32


def is_storable_text(text: str) -> bool:
    """Tell whether `text` holds no NUL and no lone surrogate."""
    # ASCII text (every `sub` a token carries, in practice) has no surrogate: two C calls
    # answer it, a third of the regex search's cost.
    if text.isascii():
        return "\x00" not in text
    return _UNSTORABLE.search(text) is None


def bidi_control_in(text: str) -> str | None:
    """The first explicit bidirectional control in `text`, written "U+202E", or None.

    A name the pages show holds none: even isolated (`<bdi>`), a POP DIRECTIONAL ISOLATE in
    it ends the isolate early in Chromium, and an override after it reorders the words around
    the name ("Trojan Source" spoofing).
    """
    found = None if text.isascii() else _BIDI_CONTROL.search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def bidi_controls_shown(text: str) -> str:
    """`text` with each explicit bidirectional control written as its code point ("[U+2069]"):
    for text a page must show though nothing refused controls in it (a personal agent's user
    id, from its token), which `bidi_control_in` says a name must not hold."""
    if text.isascii():
        return text
    return _BIDI_CONTROL.sub(lambda found: f"[U+{ord(found.group()):04X}]", text)


def is_scope_token(value: object) -> bool:
    """Whether `value` is an RFC 6749 §3.3 scope-token: a non-empty string of printable ASCII
    without space, `"` or `\\`. The one rule for a Brand's scope ids, a Poppy company's and
    an Agent Card's scopes, and the scopes a decorator requires: a name outside it (two
    scopes in one string, say) is one no grant could ever hold."""
    return isinstance(value, str) and _SCOPE_TOKEN.fullmatch(value) is not None


def is_ascii_digits(text: str) -> bool:
    """Whether `text` is one or more ASCII digits.

    `str.isdigit()` alone also accepts characters such as "²" (latin-1 0xB2, possible in an
    HTTP header) that `int()` refuses; numbers read from the wire must pass this first.
    """
    return text.isascii() and text.isdigit()


#: A fresh SHA-256 state that `sha256` copies and never updates itself: copying it skips
#: hashlib's lookup of the algorithm (0.75 vs 0.88 µs for a 400-byte token, measured side by
#: side).
_SHA256_STATE = hashlib.sha256()


def sha256(data: bytes) -> bytes:
    """`hashlib.sha256(data).digest()`, 14% cheaper: it runs on every token verified."""
    state = _SHA256_STATE.copy()
    state.update(data)
    return state.digest()


def uuid4_text() -> str:
    """A random (version 4) UUID as text, as `str(uuid.uuid4())` writes it, in a third of
    its time: every new conversation and every reply gets one.

    The bytes come from OpenSSL's CSPRNG (seeded by the OS, reseeded after a fork), not
    `os.urandom`: that one lets go of the GIL for its system call, and with a sync bot's
    worker thread waiting for the GIL each let-go became a hand-over and back, about 20
    futex calls a `message:send` instead of 2 (docs/performance.md).
    """
    raw = bytearray(ssl.RAND_bytes(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid7_text() -> str:
    """A time-ordered (version 7, RFC 9562) UUID as text, in the form `uuid4_text` writes:
    the first 48 bits are the Unix time in milliseconds, 74 of the other 80 are random
    (OpenSSL's CSPRNG, as in `uuid4_text`). Every conversation the stores mint gets one.

    Why not random: a store keeps conversations in B-tree indexes keyed by this id, and a
    random key lands on a random leaf page, so each new conversation dirties pages nobody
    touched since, which sqlite then writes to its WAL at commit, and which fall out of
    the page cache as the store grows. Ids of one millisecond share the rightmost pages
    instead: a sqlite turn's bookkeeping costs a third less (docs/performance.md, the
    sixth pass). The id shows when the conversation began, to the caller that began it.
    74 random bits keep ids unguessable; ids of one millisecond are unordered among
    themselves, which costs nothing here. The wall clock stepping back only loses order.
    """
    raw = bytearray((time.time_ns() // 1_000_000).to_bytes(6, "big") + ssl.RAND_bytes(10))
    raw[6] = raw[6] & 0x0F | 0x70  # version 7
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 (RFC 9562) variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def b64url_encode(data: bytes) -> str:
    """Encode bytes as unpadded base64url text."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str | bytes) -> bytes:
    """Decode unpadded, canonical base64url; raise `MalformedInput` for anything else."""
    raw = text.encode("ascii", "replace") if isinstance(text, str) else text
    if raw.translate(None, B64URL_ALPHABET):  # a character outside the alphabet is left
        raise MalformedInput("not base64url: unexpected character or padding")
    return b64url_decode_segment(raw)


def b64url_decode_segment(raw: bytes) -> bytes:
    """`b64url_decode` for input whose characters the caller has already matched against the
    base64url alphabet (as a JWS parser does once for a whole token)."""
    return b64_decode_translated(raw.translate(_URLSAFE_TO_STANDARD))


def b64_decode_translated(segment: bytes) -> bytes:
    """`b64url_decode_segment` for a segment already translated to the standard alphabet
    (`COMPACT_JWS_TO_STANDARD`, with no "!" left): what `parse_compact` decodes.

    The final character is checked as it was sent: the characters of `_LAST_CHAR_2` and
    `_LAST_CHAR_3` are the same in both alphabets.
    """
    remainder = len(segment) % 4
    if remainder == 1:
        raise MalformedInput("not base64url: impossible length")
    if (remainder == 2 and segment[-1] not in _LAST_CHAR_2) or (
        remainder == 3 and segment[-1] not in _LAST_CHAR_3
    ):
        raise MalformedInput("not base64url: non-canonical final character")
    try:
        # With the alphabet vetted, the plain decoder on translated input is exact and
        # cheaper than `urlsafe_b64decode` (this runs three times per token).
        return binascii.a2b_base64(segment + _PADDING[remainder])
    except binascii.Error as exc:  # pragma: no cover - the checks above rule this out
        raise MalformedInput("not base64url") from exc


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise MalformedInput("duplicate key in JSON object")
    return result


def _refuse_constant(name: str) -> Any:
    raise MalformedInput(f"JSON constant {name} is not allowed")


def _too_deep(data: bytes | str) -> bool:
    """Tell whether brackets nest deeper than `MAX_JSON_DEPTH`, ignoring string contents."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    if data.count(b"[") + data.count(b"{") <= MAX_JSON_DEPTH:
        return False
    depth = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > MAX_JSON_DEPTH:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


# One decoder, built once: `json.loads` with hooks builds a new one on every call.
_STRICT_DECODER = json.JSONDecoder(
    object_pairs_hook=_refuse_duplicates, parse_constant=_refuse_constant
)
# Its C scanner, called directly for text that starts with a value and ends with it (every
# token payload): `JSONDecoder.decode` adds two regex matches and two Python frames around
# it, 0.7 of a 3.6 µs parse of a PACT payload. Anything else takes `decode`'s full path.
# (`JSONDecoder.__init__` sets `scan_once`; typeshed does not declare it.)
_SCAN_ONCE: Callable[[str, int], tuple[Any, int]] = _STRICT_DECODER.scan_once  # type: ignore[attr-defined]


def json_loads(data: bytes | str) -> Any:
    """Parse strict JSON: UTF-8, no duplicate keys, no NaN/Infinity, bounded nesting.

    A number past a double's range (`1e400`) reads as an infinite float, as JavaScript's
    `JSON.parse` reads it, so that a token's numeric date is refused as a claim
    (`bad_claims`), as the references refuse it, not as malformed JSON. Integers keep their
    exact value.

    Raises `MalformedInput` for anything the strict reading refuses.
    """
    try:
        if isinstance(data, bytes):
            # Strict UTF-8: json.loads would sniff UTF-16/32, skip a BOM and pass surrogates.
            data = data.decode("utf-8")
        # The bracket count inline settles every token payload without a Python call.
        if data.count("[") + data.count("{") > MAX_JSON_DEPTH and _too_deep(data):
            raise MalformedInput("JSON nested too deeply")
        try:
            value, end = _SCAN_ONCE(data, 0)
        except StopIteration:  # leading whitespace, or no value at all: `decode` says which
            end = -1
        if end == len(data):
            return value
        return _STRICT_DECODER.decode(data)
    except MalformedInput:
        raise
    except (ValueError, RecursionError) as exc:
        # ValueError covers bad syntax, invalid UTF-8 and integers past Python's digit limit.
        raise MalformedInput("invalid JSON") from exc


# One encoder, built once: `json.dumps` with options builds a new one on every call (a
# fifth of serialising a `message:send` reply).
_COMPACT_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# Its C encoder, built once too and called directly: `JSONEncoder.encode` builds one per
# call (a third of serialising a `message:send` reply). Without the circular-reference
# markers: a cycle recurses until RecursionError, and then the checking encoder above runs
# again to raise what it always raised. (Not in typeshed; None without the C accelerator.)
_C_ENCODE: Callable[[Any, int], tuple[str, ...]] | None = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(
        None, _COMPACT_ENCODER.default, _encode_basestring, None, ":", ",", False, False, False
    )
)


def json_dumps(value: Any) -> bytes:
    """Serialise compactly (no spaces) as UTF-8, the form used in JWS segments."""
    if _C_ENCODE is not None:
        try:
            return "".join(_C_ENCODE(value, 0)).encode()
        except RecursionError:
            pass  # a cycle, or nesting too deep: the checking encoder tells which
    return _COMPACT_ENCODER.encode(value).encode()


def json_number(value: Any) -> float | None:
    """A parsed JSON number as a float; None for anything else (a bool is no number) and for
    an integer past a double's range, which JSON allows and `float()` refuses."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


#: What a terminal acts on rather than shows: the C0 and C1 controls (escape sequences, a
#: carriage return that overwrites the line) and the bidirectional controls, which reorder
#: what follows them on terminals that do bidi (a name `Acme\u202eexe.txt` reads `Acmetxt.exe`).
_CONTROL = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_BIDI_CONTROLS}]")
#: Those `json.dumps` leaves as they are: it escapes the C0 controls in strings itself, and
#: outside strings its indentation is made of them.
_CONTROL_PAST_C0 = re.compile(f"[\\x7f-\\x9f{_BIDI_CONTROLS}]")


def printable(text: str) -> str:
    """`text` with its control characters as escapes (`\\x1b`, `\\r`, `\\n`, `\\u202e`), for a
    terminal: what a remote party wrote (a card's name, an answer) can then neither drive the
    terminal, forge a line, nor reorder what is shown."""
    return _CONTROL.sub(lambda control: control[0].encode("unicode_escape").decode(), text)


def printable_json(text: str) -> str:
    """JSON text (`json.dumps`) with what `printable` escapes written as JSON escapes
    (`\\u009b`): the same document, shown as it is on a terminal. The controls it leaves can
    only be inside strings, where an escape means the same character."""
    return _CONTROL_PAST_C0.sub(lambda control: f"\\u{ord(control[0]):04x}", text)


#: The most characters of one request-controlled value a log line carries.
LOGGABLE_LIMIT = 200


def loggable(value: object, limit: int = LOGGABLE_LIMIT) -> str:
    """`value` (text a request controls: an issuer, a `client_id`, a code) for a log line:
    `printable`, and cut to `limit` characters with a `...(N chars)` marker, so that it can
    neither forge a line, drive the terminal of a `tail -f`, nor flood the log. An ordinary
    value comes out unchanged, so the lines operators grep for keep their wording."""
    text = printable(value if isinstance(value, str) else str(value))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...({len(text)} chars)"


__all__ = [
    "B64URL_ALPHABET",
    "COMPACT_JWS_TO_STANDARD",
    "LOGGABLE_LIMIT",
    "MAX_JSON_DEPTH",
    "b64_decode_translated",
    "b64url_decode",
    "b64url_decode_segment",
    "b64url_encode",
    "bidi_control_in",
    "bidi_controls_shown",
    "is_ascii_digits",
    "is_scope_token",
    "is_storable_text",
    "json_dumps",
    "json_loads",
    "json_number",
    "loggable",
    "printable",
    "printable_json",
    "sha256",
    "uuid4_text",
    "uuid7_text",
]
