"""Bounded, one-line text from untrusted values (pure): the one truncation rule, control
character escaping, and JSON parsing with size and depth limits.

Values that come from the API server or the kubelet (claim names, request names, error
bodies) end up in per-claim errors, log lines and `simdra usage` output. `clip` keeps
each such value to `VALUE_LIMIT` characters with a marker giving the full length, so a
100 KB namespace costs a few hundred bytes of error text, and `clip_error` caps a whole
per-claim error at `ERROR_LIMIT` bytes as a last line of defence. `escape_controls`
makes any text one line without losing what it held.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

VALUE_LIMIT = 256  # characters of one untrusted value kept in a message
ERROR_LIMIT = 4000  # bytes of one per-claim error, marker included: under 4 KiB

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators: anything a
# terminal or a line-based log reader could take as a line break or a command.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# JSON strings (escapes included) and the structural brackets, for the depth scan.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")  # to delete
# What each bracket adds to the depth, indexed by byte: the running sum and its maximum
# are then computed in C (a claim is read, and a record written, on every prepare).
_DEPTH_STEP = [0] * 256
for _byte in b"[{":
    _DEPTH_STEP[_byte] = 1
for _byte in b"]}":
    _DEPTH_STEP[_byte] = -1


def clip(value: object, limit: int = VALUE_LIMIT) -> str:
    """`str(value)`, cut to `limit` characters with `...[N chars]` when it was longer."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...[{len(text)} chars]"


def clip_error(text: str, limit: int = ERROR_LIMIT) -> str:
    """A per-claim error cut to at most `limit` bytes of UTF-8, marker included."""
    data = text.encode()
    if len(data) <= limit:
        return text
    marker = f"...[{len(data)} bytes]"
    head = data[: limit - len(marker)].decode(errors="ignore")
    return head + marker


def escape_controls(text: str) -> str:
    """`text` with every control character written as an escape (`\\n`, `\\x1b`,
    `\\u2028`), so it stays on one line and cannot move the cursor."""
    return _CONTROLS.sub(_escape, text)


def one_line(value: object, limit: int = VALUE_LIMIT) -> str:
    """A value as bounded, single-line text: clipped, then escaped."""
    return escape_controls(clip(value, limit))


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class JsonLimitError(ValueError):
    """A JSON document over the size or nesting limit."""


def json_depth(data: bytes) -> int:
    """How deeply arrays and objects nest in a JSON document (0 for a scalar), found by
    a scan that does not recurse, so it is safe on hostile input."""
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_DEPTH_STEP.__getitem__, brackets), initial=0))


def value_depth(value: Any, limit: int) -> int:
    """How deeply lists and dicts nest in a parsed value (0 for a scalar), counted
    without recursion and only up to `limit + 1`."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if not isinstance(item, dict | list):
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def load_json(data: bytes, *, max_bytes: int, max_depth: int) -> Any:
    """`json.loads(data)` within a size and a nesting limit, so that neither a huge nor a
    deeply nested document can exhaust memory or the interpreter stack (the parser stops
    at the interpreter's recursion limit; anything deeper than `max_depth` but within it
    is refused after parsing). Raises JsonLimitError over a limit, ValueError for
    anything that is not JSON."""
    if len(data) > max_bytes:
        raise JsonLimitError(f"{len(data)} bytes, more than the limit of {max_bytes}")
    try:
        value = json.loads(data)
    except RecursionError:
        depth = json_depth(data)
        raise JsonLimitError(
            f"nested {depth} levels deep, more than the limit of {max_depth}"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if value_depth(value, max_depth) > max_depth:
        raise JsonLimitError(f"nested more than {max_depth} levels deep, the limit")
    return value
