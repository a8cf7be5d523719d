"""The one JSON body parser (docs/api.md#errors, #validation). Besides the docs/api.md#errors two parse
messages it refuses, before anything else reads the body, what would break later: nesting deeper than 32
levels (Python's recursion limit, in the decoder or in any code walking the body), strings that PostgreSQL or
a UTF-8 encoder cannot hold (a lone surrogate, NUL), and numbers no column or JSON encoder can hold
(`1e999999` is infinity, an integer of 10^5 digits exceeds Python's int-string limit). A key sent twice keeps
its last value, as in every JSON decoder of the standard library."""

import json
import math
import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from rest_framework import parsers

from iam.http.errors import INVALID_STRUCTURE, MALFORMED_JSON, ApiError

MAX_DEPTH = 32  # docs/api.md#validation
MAX_INT_DIGITS = 4300  # Python's default int-string conversion limit (sys.get_int_max_str_digits)

# A JSON string, escapes included (the "unrolled loop" form: linear, no backtracking).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
# What can decode to a lone surrogate or NUL: the escapes `\u0000` and `\uD800`-`\uDFFF`, or the raw
# characters (a raw surrogate survives the decoder's "surrogatepass"). A hit only means "look closer":
# a valid surrogate pair also matches, and the walk over the decoded strings decides.
_SUSPECT = re.compile(r"\\u(?:0000|[dD][89a-fA-F])|[\x00\ud800-\udfff]")
_FORBIDDEN = re.compile(r"[\x00\ud800-\udfff]")


class _OutOfRange(Exception):
    pass


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _OutOfRange
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange
    return value


def _constant(text: str) -> float:
    raise ValueError(f"{text} is not JSON")  # NaN, Infinity, -Infinity: Python's extension, not JSON


# Built once: `json.loads` with hooks builds a decoder (and its scanner) on every call.
_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether containers nest deeper than `limit`, without recursion: strings are cut out, then the
    brackets left are counted in one pass that stops at the first level over the limit."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case: too few brackets to nest that deep, whatever their order
    depth = 0
    for char in _NOT_BRACKET.sub("", _STRING.sub("", text)):
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def unstorable(text: str) -> bool:
    """Whether a string holds what PostgreSQL or a UTF-8 encoder cannot store (a lone surrogate, NUL): for
    strings that arrive by another way than a request body (an OAuth provider's answer)."""
    return _FORBIDDEN.search(text) is not None


def _printable(text: str) -> str:
    return _FORBIDDEN.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def check_strings(body: Any) -> None:
    """400 naming the top-level field (docs/api.md#validation) when a string anywhere under it, key or value,
    holds a lone surrogate or NUL. Iterative; the depth is already bounded."""
    fields = body.items() if isinstance(body, dict) else [(None, body)]
    for field, value in fields:
        stack = [value] if field is None else [field, value]
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                if _FORBIDDEN.search(item):
                    if field is None:
                        raise ApiError(400, INVALID_STRUCTURE)
                    name = _printable(field)
                    raise ApiError(400, f"{name} must be valid unicode without NUL characters", name)
            elif isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)


def loads(raw: bytes | str) -> Any:
    """The body as Python data, or the ApiError docs/api.md#errors, #validation give for it."""
    try:
        text = raw.decode(json.detect_encoding(raw), "surrogatepass") if isinstance(raw, bytes) else raw
    except (UnicodeDecodeError, LookupError) as exc:
        raise ApiError(400, MALFORMED_JSON) from exc
    if too_deep(text):
        raise ApiError(400, INVALID_STRUCTURE)
    try:
        body = _DECODER.decode(text)
    except _OutOfRange as exc:
        raise ApiError(400, INVALID_STRUCTURE) from exc
    except RecursionError as exc:  # unreachable after `too_deep`; a 400 all the same if it ever is
        raise ApiError(400, INVALID_STRUCTURE) from exc
    except ValueError as exc:
        raise ApiError(400, MALFORMED_JSON) from exc
    # ASCII text without a `\u` escape holds no surrogate, and a raw NUL is refused by the decoder: the
    # usual body skips the scan (it cost half of a small body's parse).
    if (not text.isascii() or "\\u" in text) and _SUSPECT.search(text):
        check_strings(body)
    return body


class JsonBodyParser(parsers.BaseParser):
    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            raw = stream.read() if stream is not None else b""
        except RequestDataTooBig as exc:
            raise ApiError(413, "request body too large") from exc
        if not raw.strip():
            return {}
        return loads(raw)
