"""Regular expressions as cel-go runs them: RE2 syntax and semantics (google-re2).

`s.matches(re)` / `matches(s, re)` (CEL standard), `s.find(re)` and `s.findAll(re[, n])`
(Kubernetes' regex library). Patterns are compiled once and cached; a pattern written as
a literal is checked when the selector compiles, as Kubernetes' environment does
(ValidateRegexLiterals).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import re2  # type: ignore[import-untyped]
from celpy import celtypes
from celpy.evaluation import CELEvalError

from simdra._driver.testing.allocation.cel.operators import no_overload
from simdra._driver.testing.allocation.cel.values import type_name

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # RE2 would print each bad pattern to stderr itself


@functools.lru_cache(maxsize=256)
def compile_regex(pattern: str) -> Any:
    """The compiled pattern, or the error message (str) when it is not valid RE2."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)


def _regex_function(name: str, run: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(text: Any, pattern: Any, *args: Any) -> Any:
        if not isinstance(text, str) or not isinstance(pattern, str):
            return no_overload(f"{type_name(text)}.{name}({type_name(pattern)})")
        compiled = compile_regex(str(pattern))
        if isinstance(compiled, str):
            return CELEvalError(f"{name}({str(pattern)!r}): invalid regular expression: {compiled}")
        return run(compiled, str(text), *args)

    return evaluate


def _matches(compiled: Any, text: str) -> Any:
    return celtypes.BoolType(compiled.search(text) is not None)


def _find(compiled: Any, text: str) -> Any:
    match = compiled.search(text)
    return celtypes.StringType(match.group(0) if match else "")


def _find_all(compiled: Any, text: str, limit: Any = -1) -> Any:
    found = [m.group(0) for m in compiled.finditer(text)]
    if int(limit) >= 0:
        found = found[: int(limit)]
    return celtypes.ListType(celtypes.StringType(s) for s in found)


REGEX_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "matches": _regex_function("matches", _matches),
    "find": _regex_function("find", _find),
    "findAll": _regex_function("findAll", _find_all),
}
