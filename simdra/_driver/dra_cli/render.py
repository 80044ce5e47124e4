"""Output of `kubectl dra`: aligned tables (coloured only on a terminal, never with
NO_COLOR set), or JSON / YAML documents for machines.

JSON is written as `json.dumps(data, indent=2)` writes it, but by `_JsonWriter`: with an
indent, the standard library encodes in Python, one generator per nested value, which
took 0.5 s of `devices -o json` at 1,000 nodes and held the whole text and its pieces
at once. The writer quotes strings with the same C function, and writes as it goes.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, TextIO

import yaml

from simdra._driver.core.textlimits import escape_controls

BOLD, RED, YELLOW, GREEN, RESET = "\033[1m", "\033[31m", "\033[33m", "\033[32m", "\033[0m"
GAP = "  "


def use_colour(stream: TextIO) -> bool:
    """Colour only for a terminal, and not when NO_COLOR is set (no-color.org)."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and not os.environ.get("NO_COLOR")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], colour: bool = False) -> str:
    """Columns aligned on the widest cell (control characters escaped; the last column
    is not padded); with `colour`, a bold header and health and usage words coloured."""
    cells = [[escape_controls(c) for c in row] for row in [list(headers), *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for number, row in enumerate(cells):
        padded = [c.ljust(w) if i < len(row) - 1 else c
                  for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        line = GAP.join(padded).rstrip()
        if colour:
            line = f"{BOLD}{line}{RESET}" if number == 0 else paint(line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def paint(text: str) -> str:
    """Health words coloured: Unhealthy red, Unknown yellow."""
    return (text.replace("Unhealthy", f"{RED}Unhealthy{RESET}")
            .replace("Unknown", f"{YELLOW}Unknown{RESET}"))


def document(data: Any, output: str) -> str:
    """`data` as JSON (indented) or YAML."""
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    text = io.StringIO()
    write_json(text, data)
    return text.getvalue()


def write_json(out: TextIO, data: Any) -> None:
    """`data` written to `out` as `json.dumps(data, indent=2)` and a newline; an iterator
    in it is written as a list, item by item, so a long one is never held whole."""
    writer = _JsonWriter(out)
    writer.value(data, "\n")
    writer.parts.append("\n")
    writer.flush()


class _JsonWriter:
    FLUSH = 4096  # pieces held before they are written

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.parts: list[str] = []

    def flush(self) -> None:
        self.out.write("".join(self.parts))
        self.parts.clear()

    def value(self, value: Any, newline: str) -> None:
        """`value` at the indentation `newline` (a newline and the spaces of its line);
        the types in the order json.JSONEncoder tries them."""
        if isinstance(value, str):
            self.parts.append(encode_basestring_ascii(value))
        elif value is None:
            self.parts.append("null")
        elif value is True:
            self.parts.append("true")
        elif value is False:
            self.parts.append("false")
        elif isinstance(value, int):
            self.parts.append(int.__repr__(value))
        elif isinstance(value, dict):
            self._dict(value, newline)
        elif isinstance(value, (list, tuple, Iterator)):
            self._list(value, newline)
        else:  # a float as json writes it; anything else raises json's TypeError
            self.parts.append(json.dumps(value))

    def _dict(self, value: dict[Any, Any], newline: str) -> None:
        if not value:
            self.parts.append("{}")
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if not isinstance(key, str):
                key = _key_text(key)
            self.parts.append(separator + encode_basestring_ascii(key) + ": ")
            self.value(item, inner)
            separator = "," + inner
        self.parts.append(newline + "}")

    def _list(self, value: Any, newline: str) -> None:
        inner = newline + "  "
        separator = "[" + inner
        for item in value:
            self.parts.append(separator)
            self.value(item, inner)
            separator = "," + inner
            if len(self.parts) > self.FLUSH:
                self.flush()
        self.parts.append("[]" if separator[0] == "[" else newline + "]")


def _key_text(key: Any) -> str:
    """A key that is not a string, as json writes it (TypeError as json raises it)."""
    if isinstance(key, (int, float)) or key is None:
        return str(json.dumps(key))
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")
