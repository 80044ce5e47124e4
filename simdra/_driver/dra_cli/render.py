"""Output of `kubectl dra`: aligned tables (coloured only on a terminal, never with
NO_COLOR set), or JSON / YAML documents for machines."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
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
    return json.dumps(data, indent=2) + "\n"
