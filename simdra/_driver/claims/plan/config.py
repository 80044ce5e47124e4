"""Opaque device configuration: applying the config kinds the registered device kinds
declare (e.g. simdra's `simdra.dra.example.com/v1alpha1` GpuConfig and NicConfig).

DeviceClasses and claims carry driver parameters as opaque JSON (api-facts 5.1, 5.2). This
module turns them into typed settings and their effect on a prepared device; what one
config kind provides (`ConfigHandler`: decode, value rules, device rules, env) and the
strict `FieldReader` are in `simdra._driver.devices.config_handler`, the built-in handlers in
`simdra._driver.kinds`. `ClaimRules` carries the registered kinds' config handlers and
the device attributes they put into the container environment.

Example (a claim's `spec.devices.config[]` entry)::

    opaque:
      driver: gpu.simdra.example.com
      parameters:
        apiVersion: simdra.dra.example.com/v1alpha1
        kind: GpuConfig
        sharing:
          strategy: MPS                 # or TimeSlicing
          mpsConfig:
            defaultActiveThreadPercentage: 50
            defaultPinnedMemoryLimit: 4Gi

Decoding (`decode_config`) is strict: `apiVersion` and `kind` are required and must be
ones a handler declares, every field must be known (a typo such as `mut: 9000` is an
error, not a silently ignored setting), and every value must have the JSON type the
field needs (`mtu: "9000"` is an error). Value ranges are the handler's `problems`;
decoding reports shapes only.

Errors collect every problem of an entry, each as `<field path>: <reason>`, the path
starting at the entry's place in the claim (e.g.
`status.allocation.devices.config[1].opaque.parameters.sharing.strategy`).

Applying (`decode_entries`, `resolve_all`): which config entries configure which
prepared device, and what that changes. Rules:

* only entries for this driver reach us (`allocation` drops the others);
* application order: every `FromClass` entry, then every `FromClaim` entry, each group in
  the order of `status.allocation.devices.config`; a later entry's fields replace an
  earlier one's (`merged`), so the claim wins over the class;
* an entry with `requests` applies only to results of those requests (`req` also
  matches `req/sub` results); an entry without `requests` applies to every device of
  the claim whose type its kind's handler configures (GpuConfig -> gpu, ...);
* errors: an entry that names a request whose device is of another type (e.g. a
  NicConfig for a GPU request), and an entry without `requests` that configures no
  device of the claim at all; both are mistakes a user wants to hear about;
* limits that depend on the device are the handler's `device_problems` (an MPS
  pinned-memory limit may not exceed the memory the device or share holds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from simdra._driver.claims.plan.allocation import OpaqueConfig
from simdra._driver.core.textlimits import one_line
from simdra._driver.devices.config_handler import (
    ConfigError,
    ConfigHandler,
    ConfigTarget,
    FieldReader,
    show,
)
from simdra._driver.devices.kind_registry import KindSet

__all__ = ["ClaimRules", "ConfigEntry", "ConfigError", "ConfigTarget", "Resolved",
           "decode_config", "decode_entries", "merged", "resolve_all", "rules_for"]

FROM_CLASS = "FromClass"


@dataclass(frozen=True)
class ClaimRules:
    """Config handlers and env attributes used when planning a prepare."""

    config_handlers: Sequence[ConfigHandler] = ()
    # attribute name (as published, e.g. `uuid` or `example.com/slot`) -> env KEY
    env_attributes: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def rules_for(kinds: KindSet) -> ClaimRules:
    """The rules of the registered kinds."""
    return ClaimRules(config_handlers=kinds.config_handlers(),
                      env_attributes=kinds.env_attributes())


@dataclass(frozen=True)
class ConfigEntry:
    """One decoded entry of ours."""

    source: str  # FromClass or FromClaim
    requests: tuple[str, ...]  # empty: every request
    path: str  # where its parameters sit in the claim
    config: Any
    handler: ConfigHandler

    def applies_to(self, request: str) -> bool:
        """True when this entry configures results of `request` (`req` covers `req/sub`)."""
        if not self.requests:
            return True
        return request in self.requests or request.split("/", 1)[0] in self.requests


@dataclass(frozen=True)
class Resolved:
    """The effective config of one device and the handler of its kind."""

    config: Any
    handler: ConfigHandler

    def env(self) -> list[tuple[str, str]]:
        """The handler's env entries for this config."""
        return list(self.handler.env(self.config))

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form, recorded with the prepared claim."""
        canonical: dict[str, Any] = self.config.to_json()  # see ConfigHandler: every config has one
        return canonical


def decode_entries(
    entries: Sequence[OpaqueConfig], handlers: Sequence[ConfigHandler]
) -> list[ConfigEntry]:
    """Every entry decoded and validated, class entries first; ConfigError lists every
    problem of every entry."""
    ordered = sorted(entries, key=lambda e: e.source != FROM_CLASS)  # stable
    decoded: list[ConfigEntry] = []
    problems: list[str] = []
    for entry in ordered:
        path = f"{entry.path or 'config'}.opaque.parameters"
        try:
            config, handler = decode_config(entry.parameters, path, handlers)
        except ConfigError as exc:
            problems += [f"{p} ({_source(entry.source)})" for p in exc.problems]
            continue
        found = handler.problems(config, path)
        if found:
            problems += [f"{p} ({_source(entry.source)})" for p in found]
            continue
        decoded.append(ConfigEntry(_source(entry.source), entry.requests, path, config,
                                   handler))
    if problems:
        raise ConfigError(problems)
    return decoded


def _source(source: str) -> str:
    """How problems name where an entry came from (FromClass or FromClaim, as the API
    server allows; the claim's text is shown on one line whatever it holds)."""
    return one_line(source, 40) if source else "unknown source"


def resolve_all(
    entries: Sequence[ConfigEntry], targets: Sequence[ConfigTarget]
) -> list[Resolved | None]:
    """The effective config of each target (None: not configured); ConfigError lists
    every problem."""
    problems: list[str] = []
    used: set[int] = set()
    results: list[Resolved | None] = []
    for target in targets:
        resolved, origin = _resolve(entries, target, used, problems)
        if resolved is not None:
            problems += resolved.handler.device_problems(resolved.config, target, origin)
        results.append(resolved)
    for index, entry in enumerate(entries):
        if not entry.requests and index not in used:
            problems.append(
                f"{entry.path}: kind {entry.handler.kind} configures devices of type "
                f"{entry.handler.device_type}, but the claim has none ({entry.source})"
            )
    if problems:
        raise ConfigError(problems)
    return results


def _resolve(
    entries: Sequence[ConfigEntry], target: ConfigTarget, used: set[int], problems: list[str]
) -> tuple[Resolved | None, dict[str, str]]:
    resolved: Resolved | None = None
    origin: dict[str, str] = {}  # field -> path of the entry that set it last
    for index, entry in enumerate(entries):
        if not any(entry.applies_to(r) for r in target.requests):
            continue
        handler = entry.handler
        if target.device_type != handler.device_type:
            if entry.requests:
                problems.append(
                    f"{entry.path}.kind: {handler.kind} configures devices of type "
                    f"{handler.device_type}, but request {', '.join(target.requests)} "
                    f"got {target.label} of type {target.device_type} ({entry.source})"
                )
            continue
        used.add(index)
        if resolved is None or resolved.handler is not handler:
            resolved = Resolved(entry.config, handler)
        else:
            resolved = Resolved(merged(resolved.config, entry.config), handler)
        for f in fields(entry.config):
            if getattr(entry.config, f.name) is not None:
                origin[f.name] = entry.path
    return resolved, origin


def merged(earlier: Any, later: Any) -> Any:
    """`earlier` with every top-level field that `later` sets replaced (same type)."""
    if type(earlier) is not type(later):
        raise TypeError(f"cannot merge {type(earlier).__name__} with {type(later).__name__}")
    changes = {
        f.name: getattr(later, f.name) for f in fields(later) if getattr(later, f.name) is not None
    }
    return replace(earlier, **changes)


def decode_config(
    parameters: Any, path: str, handlers: Sequence[ConfigHandler]
) -> tuple[Any, ConfigHandler]:
    """The typed config of one entry's `opaque.parameters` and the handler of its kind;
    ConfigError otherwise. `path` is where the parameters sit."""
    if not isinstance(parameters, dict):
        raise ConfigError([f"{path}: {show(parameters)} is not an object"])
    problems: list[str] = []
    reader = FieldReader(parameters, path, problems)
    api_version = reader.string("apiVersion")
    kind = reader.string("kind")
    if problems:
        raise ConfigError(problems)
    kinds = {h.kind: h for h in handlers}
    versions = sorted({h.api_version for h in handlers})
    reads = ", ".join(versions) or "nothing: no device kind here takes parameters"
    if not api_version:
        raise ConfigError([f"{path}.apiVersion: required (this driver reads {reads})"])
    if api_version not in versions:
        problem = f"unknown version {api_version!r} (this driver reads {reads})"
        raise ConfigError([f"{path}.apiVersion: {problem}"])
    known = ", ".join(k for k, h in kinds.items() if h.api_version == api_version)
    if not kind:
        raise ConfigError([f"{path}.kind: required (one of {known})"])
    handler = kinds.get(kind)
    if handler is None or handler.api_version != api_version:
        raise ConfigError([f"{path}.kind: unknown kind {kind!r} (one of {known})"])
    config = handler.decode(reader)
    reader.finish()
    if problems:
        raise ConfigError(problems)
    return config, handler
