"""Strict decoding of opaque parameters with the handlers of the kinds this node knows.

Strict means: `apiVersion` and `kind` are required and must be ones a handler declares,
every field must be known (a typo such as `mut: 9000` is an error, not a silently
ignored setting), and every value must have the JSON type the field needs (`mtu: "9000"`
is an error). Value ranges are the handler's `problems`; decoding reports shapes only.

Errors collect every problem of an entry, each as `<field path>: <reason>`, the path
starting at the entry's place in the claim (e.g.
`status.allocation.devices.config[1].opaque.parameters.sharing.strategy`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simdra._driver.devices.config_handler import ConfigError, ConfigHandler, FieldReader, show

__all__ = ["ConfigError", "decode_config"]


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
