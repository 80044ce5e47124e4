"""Which config entries configure which prepared device, and what that changes (pure).

Rules:

* only entries for this driver reach us (`allocation.py` drops the others);
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

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from simdra._driver.claims.allocation import OpaqueConfig
from simdra._driver.claims.config.decode import ConfigError, decode_config
from simdra._driver.core.textlimits import one_line
from simdra._driver.devices.config_handler import ConfigHandler, ConfigTarget

__all__ = ["ConfigEntry", "ConfigTarget", "Resolved", "decode_entries", "merged",
           "resolve_all"]

FROM_CLASS = "FromClass"


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
