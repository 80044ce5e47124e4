"""What the device kinds of this node add to preparing a claim: the opaque config kinds
they take and the device attributes that reach the container environment.

The backend declares both (see `driver.devices.backend`); a backend that declares
neither gets simdra's defaults, the GpuConfig and NicConfig kinds and the attributes in
`driver.claims.env.DEFAULT_ENV_ATTRIBUTES`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from driver.claims.config.handler import ConfigHandler
from driver.claims.config.kinds import BUILTIN_HANDLERS
from driver.claims.env import DEFAULT_ENV_ATTRIBUTES


@dataclass(frozen=True)
class ClaimRules:
    """Config handlers and env attributes used when planning a prepare."""

    config_handlers: Sequence[ConfigHandler] = BUILTIN_HANDLERS
    # attribute name (as published, e.g. `uuid` or `example.com/slot`) -> env KEY
    env_attributes: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType(dict(DEFAULT_ENV_ATTRIBUTES)))


DEFAULT_RULES = ClaimRules()


def rules_for(backend: object) -> ClaimRules:
    """The rules a backend declares with its optional `config_handlers` and
    `env_attributes`; defaults for what it leaves out."""
    handlers = getattr(backend, "config_handlers", None)
    attributes = getattr(backend, "env_attributes", None)
    return ClaimRules(
        config_handlers=tuple(handlers) if handlers is not None else BUILTIN_HANDLERS,
        env_attributes=MappingProxyType(dict(attributes if attributes is not None
                                             else DEFAULT_ENV_ATTRIBUTES)),
    )
