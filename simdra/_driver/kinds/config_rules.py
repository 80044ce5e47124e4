"""Value rules of the config kinds that need no device (pure): ranges, enums and which
strategy settings go together. Rules that depend on the device being configured (a
limit no larger than the share) are in `apply.py`."""

from __future__ import annotations

from fractions import Fraction

from simdra._driver.kinds.config_types import (
    MPS,
    MTU_RANGE,
    SHARING_STRATEGIES,
    THREAD_PERCENTAGE_RANGE,
    TIME_SLICE_INTERVALS,
    TIME_SLICING,
    VLAN_RANGE,
    DeviceConfig,
    GpuConfig,
    GpuSharing,
    NicConfig,
)


def validation_problems(config: DeviceConfig, path: str) -> list[str]:
    """Every rule `config` breaks, each as `<field path>: <reason>`; `path` is where the
    parameters sit."""
    if isinstance(config, GpuConfig):
        return _sharing(config.sharing, f"{path}.sharing") if config.sharing else []
    return _nic(config, path)


def _sharing(sharing: GpuSharing, path: str) -> list[str]:
    problems = []
    if not sharing.strategy:
        problems.append(f"{path}.strategy: required (one of {', '.join(SHARING_STRATEGIES)})")
    elif sharing.strategy not in SHARING_STRATEGIES:
        problems.append(
            f"{path}.strategy: {_shown(sharing.strategy)} is not one of "
            f"{', '.join(SHARING_STRATEGIES)}"
        )
    if sharing.time_slicing is not None:
        if sharing.strategy != TIME_SLICING:
            problems.append(f"{path}.timeSlicingConfig: only allowed with strategy {TIME_SLICING}")
        interval = sharing.time_slicing.interval
        if interval is not None and interval not in TIME_SLICE_INTERVALS:
            problems.append(
                f"{path}.timeSlicingConfig.interval: {_shown(interval)} is not one of "
                f"{', '.join(TIME_SLICE_INTERVALS)}"
            )
    if sharing.mps is not None:
        if sharing.strategy != MPS:
            problems.append(f"{path}.mpsConfig: only allowed with strategy {MPS}")
        percentage = sharing.mps.default_active_thread_percentage
        problems += _in_range(
            percentage, THREAD_PERCENTAGE_RANGE, f"{path}.mpsConfig.defaultActiveThreadPercentage"
        )
        problems += _positive(
            sharing.mps.default_pinned_memory_limit, f"{path}.mpsConfig.defaultPinnedMemoryLimit"
        )
    return problems


def _nic(config: NicConfig, path: str) -> list[str]:
    return [
        *_in_range(config.mtu, MTU_RANGE, f"{path}.mtu"),
        *_in_range(config.vlan, VLAN_RANGE, f"{path}.vlan"),
        *_positive(config.rate_limit, f"{path}.rateLimit"),
    ]


def _in_range(value: int | None, bounds: tuple[int, int], path: str) -> list[str]:
    low, high = bounds
    if value is None or low <= value <= high:
        return []
    return [f"{path}: {_shown(value)} is out of range (must be {low} to {high})"]


def _positive(value: Fraction | None, path: str) -> list[str]:
    if value is None or value > 0:
        return []
    return [f"{path}: must be greater than 0"]


def _shown(value: object) -> str:
    """A value from the parameters as a problem shows it: its repr (one line), cut."""
    text = repr(value)
    return text if len(text) <= 100 else f"{text[:100]}...[{len(text)} chars]"
