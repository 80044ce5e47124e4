"""What the device kinds of this node add to preparing a claim: the opaque config kinds
they take and the device attributes that reach the container environment.

The backend declares both (see `driver.devices.backend`); a backend that declares
neither gets simdra's defaults, the GpuConfig and NicConfig kinds and the attributes in
`driver.claims.env.DEFAULT_ENV_ATTRIBUTES`.
"""

from __future__ import annotations

import re
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


# Keys the plugin sets itself for every device (driver.claims.env); an attribute mapped
# to one of them would give the container two values for one name.
RESERVED_KEYS = frozenset({"NAME", "POOL", "TYPE", "CDI_DEVICE", "CLAIM", "CLAIM_UID",
                           "REQUEST", "SHARE_ID", "ADMIN_ACCESS", "PARTITION"})
_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")


def rules_for(backend: object) -> ClaimRules:
    """The rules a backend declares with its optional `config_handlers` and
    `env_attributes`; defaults for what it leaves out. ValueError names a bad
    declaration (the plugin then stops at start, with that line)."""
    handlers = getattr(backend, "config_handlers", None)
    attributes = getattr(backend, "env_attributes", None)
    attributes = dict(attributes if attributes is not None else DEFAULT_ENV_ATTRIBUTES)
    name = type(backend).__name__
    for attribute, key in attributes.items():
        if not _KEY.match(key) or key in RESERVED_KEYS or key.startswith("CAPACITY_"):
            raise ValueError(
                f"{name}.env_attributes[{attribute!r}] = {key!r}: env keys are upper-case "
                f"letters, digits and _, and not one the plugin sets itself "
                f"({', '.join(sorted(RESERVED_KEYS))}, CAPACITY_*)")
    handlers = tuple(handlers) if handlers is not None else BUILTIN_HANDLERS
    kinds = [h.kind for h in handlers]
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"{name}.config_handlers: a config kind is listed twice: {kinds}")
    return ClaimRules(config_handlers=handlers, env_attributes=MappingProxyType(attributes))
