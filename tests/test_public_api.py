"""The compatibility promise of the README: the public API (`simdra`, `simdra.testing`,
`simdra.sysfs`, `simdra.runtime`) keeps every name it has published, with a signature
its callers can still call, documents each name, and names in its signatures only what a
user can import (help() shows them).

tests/public_api.txt records the API, one line a name: what it is, and for a callable
the shape of its signature (parameter names, kinds and whether they have a default;
annotations are left out, they are for mypy to judge). A name that disappears, a
parameter removed or made required, a new required parameter or a positional
parameter moved fails. New names and compatible changes pass with a warning; record
them with `SIMDRA_UPDATE_PUBLIC_API=1 python -m pytest tests/test_public_api.py`.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import enum
import importlib
import inspect
import itertools
import os
import re
import sys
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORD = Path(__file__).with_name("public_api.txt")
MODULES = ("simdra", "simdra.testing", "simdra.sysfs", "simdra.runtime")
UPDATE = "SIMDRA_UPDATE_PUBLIC_API"
# Members that come with Python's own base classes (object, Exception, Protocol, Enum,
# Generic) are Python's promise, not ours.
FOREIGN_MODULES = {"builtins", "typing", "typing_extensions", "abc", "enum"}


# --- the surface -------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One public name: `what` is class, function, method, attribute or value; `shape`
    is a callable's parameters without annotations, e.g. `(self, name, *, limit=...)`."""

    name: str
    what: str
    shape: str = ""

    def line(self) -> str:
        return " ".join(part for part in (self.name, self.what, self.shape) if part)

    @classmethod
    def parse(cls, line: str) -> Entry:
        name, what, *shape = line.split(" ", 2)
        return cls(name, what, shape[0] if shape else "")


def shape(obj: Any) -> str:
    """The signature of `obj` without annotations and with defaults as `...`; '' when
    Python cannot tell it (some builtin types)."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return ""
    parts: list[str] = []
    params = list(signature.parameters.values())
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and (i == 0 or params[i - 1].kind < p.VAR_POSITIONAL):
            parts.append("*")
        prefix = {p.VAR_POSITIONAL: "*", p.VAR_KEYWORD: "**"}.get(p.kind, "")
        default = "=..." if p.default is not p.empty else ""
        parts.append(f"{prefix}{p.name}{default}")
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params)
                                            or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    return f"({', '.join(parts)})"


def surface() -> dict[str, Entry]:
    """Every public name of the four modules and of their classes, by qualified name."""
    entries: dict[str, Entry] = {}
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in _names(module):
            qualified = f"{module_name}.{name}"
            for entry in _entries(qualified, _attribute(module, name)):
                entries[entry.name] = entry
    return entries


def _names(module: types.ModuleType) -> list[str]:
    """The module's public names: `__all__`, and those still offered while deprecated
    (`__deprecated__`): both are promised until the release that removes them."""
    return [*module.__all__, *getattr(module, "__deprecated__", ())]


def _attribute(module: types.ModuleType, name: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return getattr(module, name)


def _entries(qualified: str, obj: Any) -> Iterator[Entry]:
    if isinstance(obj, type) and not _is_alias(obj):
        yield Entry(qualified, "class", "" if issubclass(obj, enum.Enum) else shape(obj))
        for member, value in _members(obj):
            yield _member_entry(f"{qualified}.{member}", value)
    elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
        yield Entry(qualified, "function", shape(obj))
    else:
        yield Entry(qualified, "value")


def _is_alias(obj: Any) -> bool:
    return isinstance(obj, types.GenericAlias)


def _is_code(obj: Any) -> bool:
    """A class or a function (what carries its own docstring), not a type alias."""
    return (isinstance(obj, type) and not _is_alias(obj)) or inspect.isroutine(obj)


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public members defined by the class or its own (not Python's) bases, dataclass
    fields and annotated (protocol) attributes included."""
    seen: set[str] = set()
    for owner in cls.__mro__:
        if owner.__module__ in FOREIGN_MODULES:
            continue
        names = [*vars(owner), *getattr(owner, "__annotations__", {})]
        if dataclasses.is_dataclass(owner):
            names += [f.name for f in dataclasses.fields(owner)]
        for name in names:
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            yield name, vars(owner).get(name, dataclasses.MISSING)


def _member_entry(qualified: str, value: Any) -> Entry:
    if isinstance(value, (classmethod, staticmethod)):
        return Entry(qualified, "method", shape(value.__func__))
    if inspect.isfunction(value):
        return Entry(qualified, "method", shape(value))
    return Entry(qualified, "attribute")  # fields, properties, constants, enum members


# --- compatibility -----------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # positional (only), either, keyword (only), *args, **kwargs
    has_default: bool
    position: int | None  # index among the positional parameters


def params(text: str) -> dict[str, Param]:
    """The parameters of a recorded shape, by name."""
    args = ast.parse(f"def f{text}: pass").body[0].args  # type: ignore[attr-defined]
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    found = {a.arg: Param(a.arg, "positional" if i < len(args.posonlyargs) else "either",
                          i >= first_default, i) for i, a in enumerate(positional)}
    for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        found[a.arg] = Param(a.arg, "keyword", default is not None, None)
    if args.vararg:
        found["*"] = Param(args.vararg.arg, "*args", True, None)
    if args.kwarg:
        found["**"] = Param(args.kwarg.arg, "**kwargs", True, None)
    return found


def breaks(old: Entry, new: Entry | None) -> list[str]:
    """Why code written against `old` may fail against `new` (empty: it keeps working)."""
    if new is None:
        return [f"{old.name}: removed"]
    callables = {"class", "function", "method"}
    if (old.what in callables) != (new.what in callables):
        return [f"{old.name}: was a {old.what}, is a {new.what}"]
    if not old.shape or not new.shape:
        return []
    before, after = params(old.shape), params(new.shape)
    problems: list[str] = []
    for key, p in before.items():
        now = after.get(key)
        if now is None:
            problems.append(f"{old.name}: parameter {p.name} removed")
        elif p.has_default and not now.has_default:
            problems.append(f"{old.name}: parameter {p.name} made required")
        elif p.position is not None and now.position != p.position:
            problems.append(f"{old.name}: positional parameter {p.name} moved or made "
                            f"keyword-only")
        elif p.kind in ("either", "keyword") and now.kind == "positional":
            problems.append(f"{old.name}: parameter {p.name} made positional-only")
    problems += [f"{old.name}: new required parameter {p.name}"
                 for key, p in after.items() if key not in before and not p.has_default]
    return problems


def recorded() -> dict[str, Entry]:
    lines = RECORD.read_text().splitlines()
    entries = [Entry.parse(line) for line in lines if line and not line.startswith("#")]
    return {e.name: e for e in entries}


def record(entries: dict[str, Entry]) -> None:
    header = ("# The public API as recorded by tests/test_public_api.py; regenerate with\n"
              f"# {UPDATE}=1 python -m pytest tests/test_public_api.py\n")
    RECORD.write_text(header + "".join(f"{entries[k].line()}\n" for k in sorted(entries)))


# --- the promise -------------------------------------------------------------------


def test_every_recorded_name_is_still_there_with_a_compatible_signature() -> None:
    now = surface()
    if os.environ.get(UPDATE) == "1":
        record(now)
    before = recorded()

    problems = [p for name, entry in before.items() for p in breaks(entry, now.get(name))]

    assert problems == [], (
        "the public API changed incompatibly (README, Compatibility): "
        + "; ".join(problems) + f". If that is intended, record it with {UPDATE}=1")
    changed = sorted(n for n, e in now.items() if before.get(n) != e)
    if changed:
        warnings.warn(f"public API additions or compatible changes not recorded in "
                      f"{RECORD.name}: {', '.join(changed[:10])}"
                      f"{' ...' if len(changed) > 10 else ''}; run with {UPDATE}=1",
                      stacklevel=1)


def test_the_record_covers_every_module_of_the_public_api() -> None:
    modules = {name.rsplit(".", 1)[0] for name, e in recorded().items()
               if e.what in ("class", "function", "value")}

    assert modules == set(MODULES)


@pytest.mark.parametrize(("old", "new", "broken"), [
    ("(spec, edits=...)", "(spec, edits=..., *, extra=...)", ""),
    ("(spec, edits=...)", "(spec, edits=..., *args, **kwargs)", ""),
    ("(spec, edits=...)", "(spec)", "parameter edits removed"),
    ("(spec, edits=...)", "(spec, edits)", "parameter edits made required"),
    ("(spec, edits=...)", "(spec, edits=..., *, extra)", "new required parameter extra"),
    ("(spec, edits=...)", "(edits=..., spec=...)", "moved"),
    ("(spec, edits=...)", "(spec, *, edits=...)", "made keyword-only"),
    ("(spec, edits=...)", "(spec, edits=..., /)", "made positional-only"),
    ("(*, limit=...)", "(*, limit)", "parameter limit made required"),
    ("(**kwargs)", "()", "parameter kwargs removed"),
])
def test_a_signature_change_is_judged_as_its_callers_see_it(old: str, new: str,
                                                             broken: str) -> None:
    problems = breaks(Entry("simdra.f", "function", old), Entry("simdra.f", "function", new))

    assert (problems == []) if not broken else any(broken in p for p in problems), problems


def test_a_removed_name_or_a_method_turned_attribute_breaks() -> None:
    method = Entry("simdra.C.m", "method", "(self)")

    assert breaks(method, None) == ["simdra.C.m: removed"]
    assert breaks(method, Entry("simdra.C.m", "attribute")) != []


def test_the_shape_of_a_signature_is_what_callers_rely_on() -> None:
    def f(a: int, /, b: str, *args: int, c: int = 1, **kw: str) -> None: ...

    def g(a: int, *, c: int) -> None: ...

    assert shape(f) == "(a, /, b, *args, c=..., **kw)"
    assert params(shape(f))["c"] == Param("c", "keyword", True, None)
    assert shape(g) == "(a, *, c)"
    assert params(shape(g))["a"] == Param("a", "either", False, 0)


# --- the documentation -------------------------------------------------------------


def _public() -> Iterator[tuple[str, Any]]:
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in _names(module):
            yield f"{module_name}.{name}", _attribute(module, name)


def _own_doc(obj: Any) -> str:
    """The docstring the object itself carries: not a base class's, not the one
    dataclasses make up from the signature."""
    doc = vars(obj).get("__doc__") if isinstance(obj, type) else obj.__doc__
    if not doc:
        return ""
    if dataclasses.is_dataclass(obj) and doc.startswith(f"{obj.__name__}("):
        return ""
    return inspect.cleandoc(doc)


def _origin(module_name: str, name: str) -> str:
    """The module that assigns `name`, following `from m import name` and `import *`."""
    source = inspect.getsource(importlib.import_module(module_name))
    imports = [node for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.ImportFrom) and node.module]
    named = [n.module for n in imports if any(a.name == name for a in n.names)]
    starred = [n.module for n in imports if any(a.name == "*" for a in n.names)]
    following = next(iter(named or starred), None)
    return module_name if following is None else _origin(following, name)


def _value_doc(module_name: str, name: str) -> str:
    """What documents `name = ...` in the module the public module imports it from: the
    string literal after it (the attribute docstring convention) or the comment lines
    right above it."""
    source = inspect.getsource(importlib.import_module(_origin(module_name, name)))
    lines = source.splitlines()
    body = ast.parse(source).body
    for statement, following in itertools.pairwise([*body, None]):
        targets = (statement.targets if isinstance(statement, ast.Assign)
                   else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
            continue
        if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            return following.value.value
        above = itertools.takewhile(lambda line: line.lstrip().startswith("#"),
                                    reversed(lines[:statement.lineno - 1]))
        return "\n".join(line.lstrip("# ") for line in reversed(list(above)))
    return ""


@pytest.mark.parametrize("module_name", MODULES)
def test_a_deprecated_name_still_works_warns_and_is_announced(module_name: str) -> None:
    """A name leaves `__all__` for `__deprecated__` first: it still imports, with a
    DeprecationWarning that names the release it goes in and what to use instead, and
    the README's Compatibility section lists it."""
    module = importlib.import_module(module_name)
    readme = (REPO / "README.md").read_text().split("## Compatibility", 1)[1]
    for name in getattr(module, "__deprecated__", ()):
        assert name not in module.__all__
        with pytest.warns(DeprecationWarning, match=r"goes in simdra \d+\.\d+.*instead: \S"):
            getattr(module, name)
        assert f"`{module_name}.{name}`" in readme or f"`{name}`" in readme, name
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018  (a misspelling is still an AttributeError)


def test_every_public_name_has_a_docstring() -> None:
    missing = []
    for qualified, obj in _public():
        module_name, name = qualified.rsplit(".", 1)
        doc = _own_doc(obj) if _is_code(obj) else _value_doc(module_name, name)
        if not doc.strip():
            missing.append(qualified)

    assert missing == []


def literal_blocks(doc: str) -> list[str]:
    """The code of the reStructuredText literal blocks (`...::` then indented lines)."""
    blocks: list[str] = []
    lines = inspect.cleandoc(doc).splitlines()
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        indent = len(line) - len(line.lstrip())
        code = []
        for following in lines[i + 1:]:
            if following.strip() and len(following) - len(following.lstrip()) <= indent:
                break
            code.append(following)
        blocks.append("\n".join(code))
    return blocks


def _uses(code: str, name: str) -> bool:
    return re.search(rf"\b{re.escape(name)}\b", code) is not None


def test_every_class_and_function_of_simdra_has_an_example() -> None:
    import simdra

    module_examples = literal_blocks(simdra.__doc__ or "")
    missing = []
    for name in simdra.__all__:
        obj = getattr(simdra, name)
        if not _is_code(obj):
            continue
        examples = [*literal_blocks(_own_doc(obj)), *module_examples]
        if not any(_uses(code, name) for code in examples):
            missing.append(name)

    assert missing == [], "no `Example::` block using them in their docstring"


def test_a_literal_block_ends_where_the_indentation_does() -> None:
    doc = "Intro.\n\nExample::\n\n    Pool(name='a', devices=())\n    x = 1\n\nAfter."

    assert literal_blocks(doc) == ["\n    Pool(name='a', devices=())\n    x = 1\n"]


def test_the_promise_is_stated_and_the_internals_are_private() -> None:
    import simdra

    readme = (REPO / "README.md").read_text()
    section = readme.split("## Compatibility", 1)[1].split("\n## ", 1)[0]

    assert "tests/test_public_api.py" in section
    assert "`simdra._driver` is private" in section
    for module_name in MODULES:
        assert f"`{module_name}" in section or module_name == "simdra", module_name
    assert "`simdra._driver` is private" in " ".join((simdra.__doc__ or "").split())



# --- the names help() shows ----------------------------------------------------------


def _signatures(obj: Any) -> Iterator[tuple[str, inspect.Signature]]:
    """(what, signature) of a public class (its constructor and its own public methods
    and properties) or function: what `help()` prints."""
    routines: list[tuple[str, Any]] = [("", obj)]
    if isinstance(obj, type):
        for name, member in vars(obj).items():
            if name.startswith("_"):
                continue
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            elif isinstance(member, property):
                member = member.fget
            if inspect.isfunction(member):
                routines.append((f".{name}", member))
    for suffix, routine in routines:
        try:
            yield suffix, inspect.signature(routine)
        except (TypeError, ValueError):  # builtin types Python cannot tell
            continue


def _annotations(signature: inspect.Signature) -> list[str]:
    found = [p.annotation for p in signature.parameters.values()
             if p.annotation is not p.empty]
    if signature.return_annotation is not signature.empty:
        found.append(signature.return_annotation)
    # `from __future__ import annotations`: strings, as help() prints them.
    return [a if isinstance(a, str) else inspect.formatannotation(a) for a in found]


def _names_in(annotation: str) -> set[str]:
    """The names an annotation refers to (`a.b` by its first part); string literals in it
    (forward references) are parsed too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(annotation, mode="eval")):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names |= _names_in(node.value)
    return names


def _stdlib(name: str, value: Any) -> bool:
    """`name` is the standard library's own: not an alias of one of its types defined
    elsewhere (`ProfileBuild = Callable[...]` is not `Callable`)."""
    module = getattr(value, "__module__", None) or ""
    return (module.split(".", 1)[0] in sys.stdlib_module_names
            and getattr(value, "__name__", None) == name)


def unimportable_names(obj: Any, public: dict[str, list[Any]]) -> set[str]:
    """The names the annotations of `obj`'s signatures use that a user cannot import: not
    a builtin, not a public name of the public API (`public`: name -> the objects of that
    name), not a name of the standard library (typing, collections.abc, pathlib, ...)."""
    module = sys.modules[getattr(obj, "__module__", "builtins")]
    bad: set[str] = set()
    for suffix, signature in _signatures(obj):
        for annotation in _annotations(signature):
            for name in _names_in(annotation):
                value = getattr(module, name, None)
                if name.startswith("_"):
                    pass  # private wherever it comes from
                elif hasattr(builtins, name) and value in (None, getattr(builtins, name)):
                    continue
                elif name in public:
                    if value is None or any(value is p for p in public[name]):
                        continue  # the same object (or a TYPE_CHECKING import of it)
                elif _stdlib(name, value):
                    continue
                bad.add(f"{getattr(obj, '__name__', obj)}{suffix}: {name}")
    return bad


def test_the_signatures_help_shows_name_only_what_a_user_can_import() -> None:
    """help(simdra.FakeProfile) prints `build: ProfileBuild`: every name in the
    signatures of simdra's classes and functions is one a user imports from the public
    API (simdra, or simdra.runtime for the plugin's Config), a builtin or the standard
    library's, never a private alias of `driver`."""
    import simdra

    public: dict[str, list[Any]] = {}
    for qualified, obj in _public():
        public.setdefault(qualified.rsplit(".", 1)[1], []).append(obj)
    bad = set()
    for name in simdra.__all__:
        obj = getattr(simdra, name)
        if _is_code(obj):
            bad |= unimportable_names(obj, public)

    assert bad == set(), "annotations naming what the public API does not export"


def test_a_private_alias_in_a_signature_is_found() -> None:
    def build(context: _Private, index: int, path: Path) -> Entry | None: ...

    def alias(build: Builder, path: Path) -> None: ...

    def fine(path: Path, items: Iterator[str], any_: Any) -> dict[str, Entry]: ...

    assert unimportable_names(build, {}) == {"build: _Private", "build: Entry"}
    assert unimportable_names(build, {"Entry": [Entry]}) == {"build: _Private"}
    assert unimportable_names(build, {"Entry": [Param]}) == {"build: _Private",
                                                            "build: Entry"}
    assert unimportable_names(fine, {"Entry": [Entry]}) == set()
    assert unimportable_names(alias, {}) == {"alias: Builder"}
    assert unimportable_names(alias, {"Builder": [Builder]}) == set()
    assert unimportable_names(build, {"_Private": [_Private]}) == {"build: _Private",
                                                                  "build: Entry"}


_Private = int
Builder = Callable[[int], str]  # a stdlib type under a name of its own
