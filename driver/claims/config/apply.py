"""Which config entries configure which prepared device, and what that changes (pure).

Rules:

* only entries for this driver reach us (`allocation.py` drops the others);
* application order: every `FromClass` entry, then every `FromClaim` entry, each group in
  the order of `status.allocation.devices.config`; a later entry's fields replace an
  earlier one's (`types.merged`), so the claim wins over the class;
* an entry with `requests` applies only to results of those requests (`req` also
  matches `req/sub` results); an entry without `requests` applies to every device of
  the claim whose type its kind configures (GpuConfig -> gpu, NicConfig -> nic);
* errors: an entry that names a request whose device is of another type (e.g. a
  NicConfig for a GPU request), and an entry without `requests` that configures no
  device of the claim at all; both are mistakes a user wants to hear about;
* limits that depend on the device: an MPS pinned-memory limit may not exceed the
  memory the device or share holds, a NIC rate limit not the bandwidth it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from fractions import Fraction

from driver.claims.allocation import OpaqueConfig
from driver.claims.config.decode import ConfigError, decode_config
from driver.claims.config.types import (
    TIME_SLICING,
    DeviceConfig,
    GpuConfig,
    NicConfig,
    merged,
)
from driver.claims.config.validate import validation_problems
from driver.claims.errors import quantity_text
from driver.devices.quantity import ceil_int, format_quantity

FROM_CLASS = "FromClass"

# Env keys (after the per-device prefix, see `driver.claims.env`).
GPU_ENV = "GPU_"
NIC_ENV = "NIC_"


@dataclass(frozen=True)
class ConfigEntry:
    """One decoded entry of ours."""

    source: str  # FromClass or FromClaim
    requests: tuple[str, ...]  # empty: every request
    path: str  # where its parameters sit in the claim
    config: DeviceConfig

    def applies_to(self, request: str) -> bool:
        """True when this entry configures results of `request` (`req` covers `req/sub`)."""
        if not self.requests:
            return True
        return request in self.requests or request.split("/", 1)[0] in self.requests


@dataclass(frozen=True)
class ConfigTarget:
    """A prepared device as config sees it."""

    requests: tuple[str, ...]  # as allocated
    device_type: str
    label: str  # how messages name it, e.g. "device node-a/nic-0 share <id>"
    granted: Mapping[str, Fraction]  # what it holds of each capacity


def decode_entries(entries: Sequence[OpaqueConfig]) -> list[ConfigEntry]:
    """Every entry decoded and validated, class entries first; ConfigError lists every
    problem of every entry."""
    ordered = sorted(entries, key=lambda e: e.source != FROM_CLASS)  # stable
    decoded: list[ConfigEntry] = []
    problems: list[str] = []
    for entry in ordered:
        path = f"{entry.path or 'config'}.opaque.parameters"
        try:
            config = decode_config(entry.parameters, path)
        except ConfigError as exc:
            problems += [f"{p} ({entry.source or 'unknown source'})" for p in exc.problems]
            continue
        found = validation_problems(config, path)
        if found:
            problems += [f"{p} ({entry.source})" for p in found]
            continue
        decoded.append(ConfigEntry(entry.source, entry.requests, path, config))
    if problems:
        raise ConfigError(problems)
    return decoded


def resolve_all(
    entries: Sequence[ConfigEntry], targets: Sequence[ConfigTarget]
) -> list[DeviceConfig | None]:
    """The effective config of each target (None: not configured); ConfigError lists
    every problem."""
    problems: list[str] = []
    used: set[int] = set()
    results: list[DeviceConfig | None] = []
    for target in targets:
        config, origin = _resolve(entries, target, used, problems)
        if config is not None:
            problems += _device_problems(config, origin, target)
        results.append(config)
    for index, entry in enumerate(entries):
        if not entry.requests and index not in used:
            kind = entry.config.KIND
            problems.append(
                f"{entry.path}: kind {kind} configures devices of type "
                f"{entry.config.DEVICE_TYPE}, but the claim has none ({entry.source})"
            )
    if problems:
        raise ConfigError(problems)
    return results


def _resolve(
    entries: Sequence[ConfigEntry], target: ConfigTarget, used: set[int], problems: list[str]
) -> tuple[DeviceConfig | None, dict[str, str]]:
    config: DeviceConfig | None = None
    origin: dict[str, str] = {}  # field -> path of the entry that set it last
    for index, entry in enumerate(entries):
        if not any(entry.applies_to(r) for r in target.requests):
            continue
        if target.device_type != entry.config.DEVICE_TYPE:
            if entry.requests:
                problems.append(
                    f"{entry.path}.kind: {entry.config.KIND} configures devices of type "
                    f"{entry.config.DEVICE_TYPE}, but request {', '.join(target.requests)} "
                    f"got {target.label} of type {target.device_type} ({entry.source})"
                )
            continue
        used.add(index)
        config = entry.config if config is None else merged(config, entry.config)
        for f in fields(entry.config):
            if getattr(entry.config, f.name) is not None:
                origin[f.name] = entry.path
    return config, origin


def _device_problems(
    config: DeviceConfig, origin: Mapping[str, str], target: ConfigTarget
) -> list[str]:
    if isinstance(config, GpuConfig):
        mps = config.sharing.mps if config.sharing else None
        if mps is None or mps.default_pinned_memory_limit is None:
            return []
        return _at_most(
            mps.default_pinned_memory_limit,
            target,
            "memory",
            f"{origin.get('sharing')}.sharing.mpsConfig.defaultPinnedMemoryLimit",
        )
    if config.rate_limit is None:
        return []
    return _at_most(config.rate_limit, target, "bandwidth", f"{origin.get('rate_limit')}.rateLimit")


def _at_most(amount: Fraction, target: ConfigTarget, capacity: str, path: str) -> list[str]:
    held = target.granted.get(capacity)
    if held is None or amount <= held:
        return []
    return [
        # `held` (a share's consumedCapacity) may be finer than milli-units.
        f"{path}: {format_quantity(amount)} is more than the {quantity_text(held)} of "
        f"{capacity} that {target.label} holds"
    ]


def config_env(config: DeviceConfig | None) -> list[tuple[str, str]]:
    """(key, value) env entries that tell the workload its configuration."""
    if config is None:
        return []
    if isinstance(config, GpuConfig):
        return _gpu_env(config)
    return _nic_env(config)


def _gpu_env(config: GpuConfig) -> list[tuple[str, str]]:
    sharing = config.sharing
    if sharing is None:
        return []
    env = [(f"{GPU_ENV}SHARING_STRATEGY", sharing.strategy)]
    if sharing.strategy == TIME_SLICING:
        interval = sharing.time_slicing.interval if sharing.time_slicing else None
        env.append((f"{GPU_ENV}TIME_SLICE_INTERVAL", interval or "Default"))
    mps = sharing.mps
    if mps is not None and mps.default_active_thread_percentage is not None:
        env.append(
            (f"{GPU_ENV}MPS_ACTIVE_THREAD_PERCENTAGE", str(mps.default_active_thread_percentage))
        )
    if mps is not None and mps.default_pinned_memory_limit is not None:
        env += _quantity_env(f"{GPU_ENV}MPS_PINNED_MEMORY_LIMIT", mps.default_pinned_memory_limit)
    return env


def _nic_env(config: NicConfig) -> list[tuple[str, str]]:
    env = []
    if config.mtu is not None:
        env.append((f"{NIC_ENV}MTU", str(config.mtu)))
    if config.vlan is not None:
        env.append((f"{NIC_ENV}VLAN", str(config.vlan)))
    if config.rate_limit is not None:
        env += _quantity_env(f"{NIC_ENV}RATE_LIMIT", config.rate_limit)
    return env


def _quantity_env(key: str, amount: Fraction) -> list[tuple[str, str]]:
    return [(key, format_quantity(amount)), (f"{key}_VALUE", str(ceil_int(amount)))]
