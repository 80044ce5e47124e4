"""CEL selector expressions of DeviceClasses and requests, checked as the API server
compiles them: at most 10 KiB, valid CEL, and of type bool (or dyn) in the DRA
environment."""

from __future__ import annotations

from typing import Any

from simdra._driver.testing.allocation.cel import UnsupportedExpression, compile_selector
from simdra._driver.testing.apiserver.validation.celtype_rules import (
    ANY,
    BOOL,
    DYN,
    TypeCheckError,
    shown,
)
from simdra._driver.testing.apiserver.validation.celtypes import result_type
from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    invalid,
    required,
    too_long,
    too_many,
)

MAX_EXPRESSION_BYTES = 10 * 1024
MAX_SELECTORS = 32


def expression_errors(expression: Any, path: str) -> list[FieldError]:
    """Why the API server would refuse this selector expression ([] when it compiles).

    The type check comes first: for an expression it follows (and so parses), its verdict
    is the server's; only then may the CEL compiler refuse what it does not parse.
    """
    text = expression if isinstance(expression, str) else ""
    if len(text.encode()) > MAX_EXPRESSION_BYTES:
        return [too_long(path, MAX_EXPRESSION_BYTES)]  # the server does not compile it
    try:
        kind = result_type(text)
    except TypeCheckError as error:
        return [invalid(path, text, f"compilation failed: {_located(text, error)}")]
    if kind not in (BOOL, DYN, ANY):
        detail = f"must evaluate to bool or the unknown type, not {shown(kind)}"
        return [invalid(path, text, detail)]
    try:
        compile_selector(text)
    except UnsupportedExpression as error:
        return [invalid(path, text, f"compilation failed: {error}")]
    return []


def _located(text: str, error: TypeCheckError) -> str:
    """The error as CEL prints it: line and column, the line, a caret under the place."""
    line_start = text.rfind("\n", 0, error.pos) + 1
    line_end = text.find("\n", error.pos)
    line = text[line_start : line_end if line_end >= 0 else len(text)]
    row, column = text.count("\n", 0, error.pos) + 1, error.pos - line_start
    return f"ERROR: <input>:{row}:{column + 1}: {error}\n | {line}\n | {'.' * column}^"


def selector_list_errors(selectors: Any, path: str, stored: bool = False) -> list[FieldError]:
    """Errors of a `selectors` list: its size, then each entry's `cel.expression`.

    `stored`: the selectors are exactly as already stored, and expressions valid then are
    not compiled again (the server lets an object keep what it once accepted).
    """
    if not isinstance(selectors, list):
        return []
    if len(selectors) > MAX_SELECTORS:
        return [too_many(path, len(selectors), MAX_SELECTORS)]
    errors = []
    for i, selector in enumerate(selectors):
        cel = selector.get("cel") if isinstance(selector, dict) else None
        if not isinstance(cel, dict):
            errors.append(required(f"{path}[{i}].cel"))
        elif not stored:
            errors += expression_errors(cel.get("expression"), f"{path}[{i}].cel.expression")
    return errors
