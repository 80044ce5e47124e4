"""Strict decoding of opaque parameters into the types of `types.py` (pure).

Strict means: `apiVersion` and `kind` are required and must be ones this driver knows,
every field must be known (a typo such as `mut: 9000` is an error, not a silently
ignored setting), and every value must have the JSON type the field needs (`mtu: "9000"`
is an error). Value ranges are `validate.py`'s business; decoding reports shapes only.

Errors collect every problem of an entry, each as `<field path>: <reason>`, the path
starting at the entry's place in the claim (e.g.
`status.allocation.devices.config[1].opaque.parameters.sharing.strategy`).
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from driver.claims.config.types import (
    API_VERSION,
    KINDS,
    DeviceConfig,
    GpuConfig,
    GpuSharing,
    Mps,
    NicConfig,
    TimeSlicing,
)
from driver.devices.quantity import QuantityError, format_quantity, parse_quantity


class ConfigError(ValueError):
    """One or more problems of one opaque config entry, each naming its field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class _Reader:
    """Reads the fields of one JSON object, remembering which were read, so that the
    rest can be reported as unknown."""

    def __init__(self, raw: Mapping[str, Any], path: str, problems: list[str]) -> None:
        self.raw = raw
        self.path = path
        self.problems = problems
        self._known: set[str] = set()

    def field(self, name: str) -> tuple[str, Any]:
        self._known.add(name)
        return f"{self.path}.{name}", self.raw.get(name)

    def string(self, name: str) -> str | None:
        path, value = self.field(name)
        if value is None or isinstance(value, str):
            return value
        return self._wrong(path, value, "a string")

    def integer(self, name: str) -> int | None:
        path, value = self.field(name)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        return self._wrong(path, value, "an integer")

    def quantity(self, name: str) -> Fraction | None:
        path, value = self.field(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            return self._wrong(path, value, 'a quantity such as "4Gi" or "500M"')
        try:
            amount = parse_quantity(value)
            format_quantity(amount)  # finer than milli-units cannot be written back
        except QuantityError as exc:
            self.problems.append(f"{path}: {exc}")
            return None
        return amount

    def obj(self, name: str) -> _Reader | None:
        path, value = self.field(name)
        if value is None:
            return None
        if not isinstance(value, dict):
            return self._wrong(path, value, "an object")
        return _Reader(value, path, self.problems)

    def finish(self) -> None:
        for name in sorted(set(self.raw) - self._known):
            self.problems.append(f"{self.path}.{name}: unknown field")

    def _wrong(self, path: str, value: Any, expected: str) -> None:
        self.problems.append(f"{path}: {_show(value)} is not {expected}")
        return None


def decode_config(parameters: Any, path: str) -> DeviceConfig:
    """The typed config of one entry's `opaque.parameters`; ConfigError otherwise.

    `path` is where the parameters sit (e.g. `...config[1].opaque.parameters`).
    """
    if not isinstance(parameters, dict):
        raise ConfigError([f"{path}: {_show(parameters)} is not an object"])
    problems: list[str] = []
    reader = _Reader(parameters, path, problems)
    api_version = reader.string("apiVersion")
    kind = reader.string("kind")
    if problems:
        raise ConfigError(problems)
    if not api_version:
        raise ConfigError([f"{path}.apiVersion: required (this driver reads {API_VERSION})"])
    if api_version != API_VERSION:
        problem = f"unknown version {api_version!r} (this driver reads {API_VERSION})"
        raise ConfigError([f"{path}.apiVersion: {problem}"])
    if not kind:
        raise ConfigError([f"{path}.kind: required (one of {', '.join(KINDS)})"])
    if kind not in KINDS:
        raise ConfigError([f"{path}.kind: unknown kind {kind!r} (one of {', '.join(KINDS)})"])
    config = _gpu(reader) if kind == GpuConfig.KIND else _nic(reader)
    reader.finish()
    if problems:
        raise ConfigError(problems)
    return config


def _gpu(reader: _Reader) -> GpuConfig:
    sharing = reader.obj("sharing")
    if sharing is None:
        return GpuConfig()
    strategy = sharing.string("strategy")
    time_slicing = sharing.obj("timeSlicingConfig")
    mps = sharing.obj("mpsConfig")
    decoded = GpuSharing(
        strategy=strategy or "",
        time_slicing=_time_slicing(time_slicing) if time_slicing is not None else None,
        mps=_mps(mps) if mps is not None else None,
    )
    sharing.finish()
    return GpuConfig(sharing=decoded)


def _time_slicing(reader: _Reader) -> TimeSlicing:
    decoded = TimeSlicing(interval=reader.string("interval"))
    reader.finish()
    return decoded


def _mps(reader: _Reader) -> Mps:
    decoded = Mps(
        default_active_thread_percentage=reader.integer("defaultActiveThreadPercentage"),
        default_pinned_memory_limit=reader.quantity("defaultPinnedMemoryLimit"),
    )
    reader.finish()
    return decoded


def _nic(reader: _Reader) -> NicConfig:
    return NicConfig(
        mtu=reader.integer("mtu"),
        vlan=reader.integer("vlan"),
        rate_limit=reader.quantity("rateLimit"),
    )


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict | list):
        return type(value).__name__
    return repr(value)
