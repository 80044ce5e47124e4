"""OpenAPI (JSON schema) validation of request bodies, strict: unknown fields are errors.

The schemas are the "strict" ones bundled with `kubernetes_validate` (unknown fields
forbidden). That package's `validate()` re-reads the 1.5 MB definitions file on every
call, runs a generic jsonschema validator (about 35 ms for a 128-device slice) and stops
at the first error. The definitions only use a handful of keywords (type, properties,
additionalProperties, items, required, enum, oneOf, $ref; format is informational), so
here each kind's schema is compiled once into nested closures that check a body in
well under a few milliseconds and report every error with its API field path
(`spec.devices[3].capacity[memory].value`), the way the API server names fields.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from simdra._driver.testing.apiserver.validation.field import (
    FieldError,
    forbidden,
    invalid,
    not_supported,
    required,
    type_invalid,
)

DEFAULT_VERSION = "1.37"

# check(value, path, errors): append every violation of `value` (found at `path`).
Check = Callable[[Any, str, list[FieldError]], None]


class SchemaUnavailable(LookupError):
    """No bundled schema for this kind/apiVersion/Kubernetes version."""


def _schema_root() -> Path:
    return Path(str(resources.files("kubernetes_validate") / "kubernetes-json-schema"))


@functools.cache
def schema_dir(version: str = DEFAULT_VERSION) -> Path:
    """The strict schema directory of the newest bundled version not newer than `version`."""
    major, minor = (int(p) for p in version.lstrip("v").split(".")[:2])
    candidates = []
    for entry in _schema_root().iterdir():
        match = re.fullmatch(r"v(\d+)\.(\d+)\.\d+-local-strict", entry.name)
        if match and (int(match[1]), int(match[2])) <= (major, minor):
            candidates.append(((int(match[1]), int(match[2])), entry))
    if not candidates:
        raise SchemaUnavailable(f"no bundled schema for Kubernetes {version}")
    return max(candidates)[1]


@functools.cache
def _compiler(directory: Path) -> _Compiler:
    definitions = json.loads((directory / "_definitions.json").read_text())
    return _Compiler(definitions["$defs"])


# The stand-in serves requests on many threads, and a compiler shares its `$ref`s between
# kinds: a ref still being compiled is a placeholder that must not be called yet, so one
# kind is compiled at a time.
_COMPILING = threading.Lock()


@functools.cache
def validator_for(kind: str, api_version: str, version: str = DEFAULT_VERSION) -> Check:
    """The compiled check of one kind, e.g. ("ResourceSlice", "resource.k8s.io/v1")."""
    with _COMPILING:
        return _compile(kind, api_version, version)


def _compile(kind: str, api_version: str, version: str) -> Check:
    directory = schema_dir(version)
    # Same file naming as kubernetes_validate: resource.k8s.io/v1 -> resource-v1.
    suffix = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    path = directory / f"{kind.lower()}-{suffix}.json"
    if not path.exists():
        raise SchemaUnavailable(f"no schema for {kind} {api_version} in {directory.name}")
    return _compiler(directory).compile(json.loads(path.read_text()))


def schema_errors(obj: dict[str, Any], version: str = DEFAULT_VERSION) -> list[FieldError]:
    """Every schema violation of a full object (kind and apiVersion read from it)."""
    errors: list[FieldError] = []
    validator_for(obj["kind"], obj["apiVersion"], version)(obj, "", errors)
    return errors


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _where(path: str) -> str:
    return path or "<root>"


_TYPES: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (
        (isinstance(v, int) and not isinstance(v, bool))
        or (isinstance(v, float) and v.is_integer())
    ),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _brief(value: Any) -> Any:
    """What an error shows of a value: scalars as they are, containers by their kind."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    return value


class _Compiler:
    """Turns schema nodes into Check closures; `$ref`s are compiled once and shared."""

    def __init__(self, definitions: dict[str, Any]) -> None:
        self._defs = definitions
        self._compiled: dict[str, Check] = {}

    def ref(self, name: str) -> Check:
        if name not in self._compiled:
            # A placeholder first, so recursive definitions (JSONSchemaProps) terminate.
            cell: list[Check] = []
            self._compiled[name] = lambda v, p, e: cell[0](v, p, e)
            cell.append(self.compile(self._defs[name]))
            self._compiled[name] = cell[0]
        return self._compiled[name]

    def compile(self, schema: dict[str, Any]) -> Check:
        if "$ref" in schema:
            return self.ref(schema["$ref"].rsplit("/", 1)[-1])
        checks: list[Check] = []
        if "type" in schema:
            checks.append(self._type(schema["type"]))
        if "enum" in schema:
            checks.append(self._enum(schema["enum"]))
        if "oneOf" in schema:
            checks.append(self._one_of([self.compile(s) for s in schema["oneOf"]]))
        if "properties" in schema or "additionalProperties" in schema or "required" in schema:
            checks.append(self._object(schema))
        if "items" in schema:
            checks.append(self._items(self.compile(schema["items"])))
        return _all_of(checks)

    @staticmethod
    def _type(declared: str | list[str]) -> Check:
        names = declared if isinstance(declared, list) else [declared]
        tests = [_TYPES[n] for n in names]
        wanted = " or ".join(n for n in names if n != "null")

        def check(value: Any, path: str, errors: list[FieldError]) -> None:
            if not any(t(value) for t in tests):
                errors.append(
                    type_invalid(_where(path), _brief(value), f"must be of type {wanted}")
                )

        return check

    @staticmethod
    def _enum(values: list[Any]) -> Check:
        allowed = list(values)

        def check(value: Any, path: str, errors: list[FieldError]) -> None:
            if value not in allowed:
                errors.append(not_supported(_where(path), value, [str(v) for v in allowed]))

        return check

    @staticmethod
    def _one_of(options: list[Check]) -> Check:
        def check(value: Any, path: str, errors: list[FieldError]) -> None:
            passing = 0
            for option in options:
                found: list[FieldError] = []
                option(value, path, found)
                passing += not found
            if passing != 1:
                shown = _brief(value)
                errors.append(
                    invalid(
                        _where(path),
                        shown,
                        "must match exactly one of the "
                        "allowed types (e.g. a quantity "
                        "string or a number)",
                    )
                )

        return check

    def _object(self, schema: dict[str, Any]) -> Check:
        properties = {k: self.compile(v) for k, v in schema.get("properties", {}).items()}
        extra = schema.get("additionalProperties", True)
        extra_check = self.compile(extra) if isinstance(extra, dict) else None
        closed = extra is False
        needed = list(schema.get("required", ()))

        def check(value: Any, path: str, errors: list[FieldError]) -> None:
            if not isinstance(value, dict):
                return  # the type check reports it
            for name in needed:
                if name not in value:
                    errors.append(required(_join(path, name)))
            for name, item in value.items():
                prop = properties.get(name)
                if prop is not None:
                    prop(item, _join(path, name), errors)
                elif extra_check is not None:
                    extra_check(item, f"{path}[{name}]", errors)
                elif closed:
                    where = _join(path, name)
                    errors.append(forbidden(where, f'unknown field "{where}"'))

        return check

    @staticmethod
    def _items(item_check: Check) -> Check:
        def check(value: Any, path: str, errors: list[FieldError]) -> None:
            if isinstance(value, list):
                for i, item in enumerate(value):
                    item_check(item, f"{path}[{i}]", errors)

        return check


def _all_of(checks: list[Check]) -> Check:
    if not checks:
        return lambda v, p, e: None
    if len(checks) == 1:
        return checks[0]

    def check(value: Any, path: str, errors: list[FieldError]) -> None:
        for c in checks:
            c(value, path, errors)

    return check
