"""docs/architecture.md's size table is counted here: each row's lines of Python under its
path (the generated gRPC code left out), within 5% of the figure the page states.
`SIMDRA_UPDATE_DOCS=1 python -m pytest tests/test_architecture_figures.py` writes the
counts, rounded to hundreds (tens below a thousand), into the page."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
GENERATED = REPO / "simdra" / "_driver" / "kubelet" / "gen"
HARNESS = REPO / "simdra" / "_driver" / "testing"
# | part | `path/` or `glob` [less the harness] | about N |
ROW = re.compile(r"^\| ([^|]+) \| `([\w/*.]+)`( less the harness)? \| about ([\d,]+) \|$", re.M)
TOLERANCE = 0.05


def _lines(path: str, less_harness: bool) -> int:
    found = REPO.glob(path) if "*" in path else (REPO / path).rglob("*.py")
    files = [f for f in found if GENERATED not in f.parents
             and not (less_harness and HARNESS in f.parents)]
    return sum(len(f.read_text().splitlines()) for f in files)


def _rounded(count: int) -> str:
    # Hundreds, or tens below a thousand: a small part's figure stays within the tolerance.
    return f"{round(count, -2 if count >= 1000 else -1):,}"


def test_every_size_in_the_architecture_page_is_counted() -> None:
    text = PAGE.read_text()
    rows = ROW.findall(text)
    assert len(rows) >= 8, "the size table of docs/architecture.md is gone or reshaped"
    if os.environ.get("SIMDRA_UPDATE_DOCS") == "1":
        PAGE.write_text(ROW.sub(lambda m: m[0].replace(
            f"about {m[4]}", f"about {_rounded(_lines(m[2], bool(m[3])))}"), text))
        return
    wrong = []
    for part, path, less, stated in rows:
        counted = _lines(path, bool(less))
        if abs(int(stated.replace(",", "")) - counted) > TOLERANCE * counted:
            wrong.append(f"{part} ({path}): the page says about {stated}, counted {counted}")
    assert not wrong, "; ".join(wrong) + " (SIMDRA_UPDATE_DOCS=1 rewrites them)"
