"""Hostile inputs for the parsers of outside input, and the checks every error must pass.

Three families of input:

* `hostile_text`: names that try to leave a directory (`../`, `/`, NUL), forge log
  lines (newlines, U+2028, escape sequences), or cost memory (100 KB), mixed with
  ordinary Unicode;
* `json_values`: any JSON tree of those, including numbers the API never sends
  (huge integers, NaN, infinities) and nesting deeper than any parser limit;
* `mutated(valid)`: a valid document with a few fields deleted, replaced by a hostile
  value, retyped or buried in nesting: the inputs that reach furthest into a parser.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from simdra._driver.core.textlimits import ERROR_LIMIT

# A path that walks out of any directory, names an absolute one, or cannot be a file name.
PATHS = ["..", "../", "../../etc/passwd", "/", "/etc/passwd", "/tmp/x", "a/../../b", ".", "",
         "a\x00b", "\x00", "~", "$HOME", "./x", "x/", "//x", "\\..\\x", "x" * 256]
# Text that would forge a log line, move a terminal's cursor or break a one-line answer.
FORGERS = ["a\nb", "\r\n2026-01-01T00:00:00Z INFO forged", "\x1b[2J", "\u2028", "\u2029",
           "\x85", "\t", "\x7f", "\u202e", "\ufeff", "\ud7ff\ue000"]
HUGE = ["x" * 100_000, "\n" * 5_000, "é" * 40_000, "a/" * 10_000]

hostile_text = st.one_of(
    st.sampled_from(PATHS + FORGERS),
    st.sampled_from(HUGE),
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from("abc-./_\x00\n"), max_size=300),
)
# protobuf strings must be valid UTF-8: no lone surrogates
utf8_text = st.one_of(
    st.sampled_from(PATHS + FORGERS + HUGE),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40),
)

numbers = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, -1, 2**63, -(2**63) - 1, 10**300, -(10**300), 10**4000]),
    st.floats(allow_nan=True, allow_infinity=True),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, hostile_text)


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any JSON tree (as json.loads makes it) of hostile scalars."""
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(hostile_text, children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def nested(depth: int, leaf: Any = 1) -> Any:
    """A list nested `depth` levels deep, built without recursion."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


deep_values = st.integers(min_value=30, max_value=3_000).map(nested)


def _paths(tree: Any, max_depth: int = 12) -> Iterator[tuple[Any, ...]]:
    """The path of every node of `tree` down to `max_depth`, without recursion."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(tree, ())]
    while stack:
        node, prefix = stack.pop()
        yield prefix
        if len(prefix) >= max_depth:
            continue
        if isinstance(node, dict):
            stack.extend((value, (*prefix, key)) for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, (*prefix, index)) for index, value in enumerate(node))


def _retype(value: Any) -> Any:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value)}
    if isinstance(value, str):
        return [value]
    return str(value)


_OPS: list[str] = ["delete", "replace", "retype", "bury", "duplicate", "null", "deep"]


@st.composite
def mutated(draw: st.DrawFn, valid: Any, max_mutations: int = 3) -> Any:
    """`valid` (deep-copied) with 1 to `max_mutations` fields changed for the worse."""
    tree = copy.deepcopy(valid)
    for _ in range(draw(st.integers(min_value=1, max_value=max_mutations))):
        paths = list(_paths(tree))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(_OPS))
        if not path:
            if op in ("replace", "retype", "null"):
                tree = draw(json_values()) if op == "replace" else _retype(tree)
            continue
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if op == "delete":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(json_values(6))
        elif op == "retype":
            parent[key] = _retype(parent[key])
        elif op == "bury":
            parent[key] = nested(draw(st.integers(1, 40)), parent[key])
        elif op == "duplicate" and isinstance(parent, list):
            parent.extend([parent[key]] * draw(st.integers(1, 50)))
        elif op == "null":
            parent[key] = None
        elif op == "deep":
            parent[key] = draw(deep_values)
        if isinstance(parent, dict) and op == "replace" and draw(st.booleans()):
            parent[draw(hostile_text)] = draw(json_values(4))  # an unknown field too
    return tree


def to_json_bytes(value: Any) -> bytes:
    """`value` as JSON text, NaN and infinities as Python writes them; deep trees
    that json.dumps cannot write (its encoder recurses) as the brackets alone."""
    try:
        return json.dumps(value).encode("utf-8", "surrogatepass")
    except RecursionError:
        return b"[" * 5_000 + b"]" * 5_000


# --- the checks -------------------------------------------------------------------------

# What a one-line error must not hold: the controls textlimits.escape_controls escapes.
_LINE_BREAKERS = {chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029]}


def assert_one_line(text: str, limit: int = ERROR_LIMIT) -> None:
    """`text` is a non-empty error on one line, no control characters, at most `limit`
    bytes of UTF-8."""
    assert text, "an empty error"
    found = sorted({c for c in text if c in _LINE_BREAKERS})
    assert not found, f"control characters {found!r} in {text[:300]!r}"
    size = len(text.encode("utf-8", "surrogatepass"))
    assert size <= limit, f"{size} bytes, over {limit}: {text[:300]!r}"


def tree_snapshot(root: Path, skip: Callable[[Path], bool] = lambda p: False) -> dict[str, Any]:
    """Every path under `root` (not those `skip` says) with its type, size and mtime,
    for a before/after comparison; symlinks are not followed."""
    found: dict[str, Any] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if not skip(here / d)]
        for name in [*dirnames, *filenames]:
            path = here / name
            if skip(path):
                continue
            info = path.lstat()
            found[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def inside(*owned: Path) -> Callable[[Path], bool]:
    """A `skip` for `tree_snapshot`: the paths in or under one of `owned`."""
    resolved = [p.resolve() for p in owned]

    def skip(path: Path) -> bool:
        real = path.resolve()
        return any(real == o or o in real.parents for o in resolved)

    return skip
