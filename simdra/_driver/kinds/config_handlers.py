"""The config handlers of simdra's own device kinds: GpuConfig for `gpu` devices,
NicConfig for `nic` devices (fields in `config_types.py`, value rules in
`config_rules.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from simdra._driver.api import ConfigTarget, FieldReader, ceil_int, format_quantity, quantity_text
from simdra._driver.kinds.config_rules import validation_problems
from simdra._driver.kinds.config_types import (
    API_VERSION,
    TIME_SLICING,
    GpuConfig,
    GpuSharing,
    Mps,
    NicConfig,
    TimeSlicing,
)

# Env keys (after the per-device prefix, see `simdra._driver.claims.plan.cdi`).
GPU_ENV = "GPU_"
NIC_ENV = "NIC_"


class GpuConfigHandler:
    """kind GpuConfig: sharing strategy of `gpu` devices (TimeSlicing or MPS)."""

    api_version = API_VERSION
    kind = GpuConfig.KIND
    device_type = GpuConfig.DEVICE_TYPE

    def decode(self, fields: FieldReader) -> GpuConfig:
        """GpuConfig from its fields."""
        sharing = fields.obj("sharing")
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

    def problems(self, config: GpuConfig, path: str) -> list[str]:
        """Ranges and which strategy settings go together."""
        return validation_problems(config, path)

    def device_problems(self, config: GpuConfig, target: ConfigTarget,
                        origin: Mapping[str, str]) -> list[str]:
        """An MPS pinned-memory limit may not exceed the memory the device or share holds."""
        mps = config.sharing.mps if config.sharing else None
        if mps is None or mps.default_pinned_memory_limit is None:
            return []
        path = f"{origin.get('sharing')}.sharing.mpsConfig.defaultPinnedMemoryLimit"
        return at_most(mps.default_pinned_memory_limit, target, "memory", path)

    def env(self, config: GpuConfig) -> list[tuple[str, str]]:
        """GPU_SHARING_STRATEGY, GPU_TIME_SLICE_INTERVAL, GPU_MPS_*."""
        sharing = config.sharing
        if sharing is None:
            return []
        env = [(f"{GPU_ENV}SHARING_STRATEGY", sharing.strategy)]
        if sharing.strategy == TIME_SLICING:
            interval = sharing.time_slicing.interval if sharing.time_slicing else None
            env.append((f"{GPU_ENV}TIME_SLICE_INTERVAL", interval or "Default"))
        mps = sharing.mps
        if mps is not None and mps.default_active_thread_percentage is not None:
            env.append((f"{GPU_ENV}MPS_ACTIVE_THREAD_PERCENTAGE",
                        str(mps.default_active_thread_percentage)))
        if mps is not None and mps.default_pinned_memory_limit is not None:
            env += quantity_env(f"{GPU_ENV}MPS_PINNED_MEMORY_LIMIT",
                                mps.default_pinned_memory_limit)
        return env


class NicConfigHandler:
    """kind NicConfig: MTU, VLAN and rate limit of `nic` devices."""

    api_version = API_VERSION
    kind = NicConfig.KIND
    device_type = NicConfig.DEVICE_TYPE

    def decode(self, fields: FieldReader) -> NicConfig:
        """NicConfig from its fields."""
        return NicConfig(mtu=fields.integer("mtu"), vlan=fields.integer("vlan"),
                         rate_limit=fields.quantity("rateLimit"))

    def problems(self, config: NicConfig, path: str) -> list[str]:
        """MTU and VLAN ranges, a positive rate limit."""
        return validation_problems(config, path)

    def device_problems(self, config: NicConfig, target: ConfigTarget,
                        origin: Mapping[str, str]) -> list[str]:
        """A rate limit may not exceed the bandwidth the device or share holds."""
        if config.rate_limit is None:
            return []
        return at_most(config.rate_limit, target, "bandwidth",
                       f"{origin.get('rate_limit')}.rateLimit")

    def env(self, config: NicConfig) -> list[tuple[str, str]]:
        """NIC_MTU, NIC_VLAN, NIC_RATE_LIMIT(_VALUE)."""
        env = []
        if config.mtu is not None:
            env.append((f"{NIC_ENV}MTU", str(config.mtu)))
        if config.vlan is not None:
            env.append((f"{NIC_ENV}VLAN", str(config.vlan)))
        if config.rate_limit is not None:
            env += quantity_env(f"{NIC_ENV}RATE_LIMIT", config.rate_limit)
        return env



def at_most(amount: Fraction, target: ConfigTarget, capacity: str, path: str) -> list[str]:
    """The problem when `amount` is more than what `target` holds of `capacity`."""
    held = target.granted.get(capacity)
    if held is None or amount <= held:
        return []
    return [
        # `held` (a share's consumedCapacity) may be finer than milli-units.
        f"{path}: {format_quantity(amount)} is more than the {quantity_text(held)} of "
        f"{capacity} that {target.label} holds"
    ]


def quantity_env(key: str, amount: Fraction) -> list[tuple[str, str]]:
    """KEY=<quantity> and KEY_VALUE=<integer, rounded up>."""
    return [(key, format_quantity(amount)), (f"{key}_VALUE", str(ceil_int(amount)))]


def _time_slicing(reader: FieldReader) -> TimeSlicing:
    decoded = TimeSlicing(interval=reader.string("interval"))
    reader.finish()
    return decoded


def _mps(reader: FieldReader) -> Mps:
    decoded = Mps(
        default_active_thread_percentage=reader.integer("defaultActiveThreadPercentage"),
        default_pinned_memory_limit=reader.quantity("defaultPinnedMemoryLimit"),
    )
    reader.finish()
    return decoded
