"""The driver's code stays in pieces a reader can hold: no module over 400 lines, no
function over 40, so that each file is named for one role and each function can be read
at once. The generated gRPC stubs (simdra/_driver/kubelet/gen) are left out; they are not ours.

A failure names every file and function over its limit, with its length.
"""

from __future__ import annotations

import ast
from pathlib import Path

DRIVER = Path(__file__).resolve().parent.parent / "simdra" / "_driver"
GENERATED = DRIVER / "kubelet" / "gen"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 40


def _sources() -> list[Path]:
    return sorted(p for p in DRIVER.rglob("*.py") if GENERATED not in p.parents)


def _long_functions(path: Path) -> list[str]:
    """`path:line name (N lines)` for each function or method, nested ones included,
    whose `def` line through its last line spans more than the limit."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                where = path.relative_to(DRIVER.parent)
                found.append(f"{where}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_the_checks_see_the_driver_sources() -> None:
    """Guards the two checks below against passing because they read nothing."""
    names = {p.relative_to(DRIVER).as_posix() for p in _sources()}
    assert {"claims/preparer.py", "plugin.py"} <= names
    assert not any(name.startswith("kubelet/gen/") for name in names)


def test_no_driver_module_is_over_400_lines() -> None:
    too_long = [
        f"{path.relative_to(DRIVER.parent)} ({lines} lines)"
        for path in _sources()
        if (lines := len(path.read_text().splitlines())) > MAX_FILE_LINES
    ]
    assert not too_long, f"modules over {MAX_FILE_LINES} lines: " + ", ".join(too_long)


def test_no_driver_function_is_over_40_lines() -> None:
    too_long = [entry for path in _sources() for entry in _long_functions(path)]
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(too_long)
