"""What the device kinds of this node add to preparing a claim: the opaque config kinds
they take and the device attributes that reach the container environment.

Both come from the registered kinds (`simdra._driver.devices.kind_registry.KindSet`), checked
there (one config kind per apiVersion and kind, valid env keys, one key per attribute).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from simdra._driver.devices.config_handler import ConfigHandler
from simdra._driver.devices.kind_registry import KindSet


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
