"""The kinds of `simdra.dra.example.com/v1alpha1`, one per device type.

Every field is optional so that a class can set some fields and a claim others; merging
(`apply.merged`) goes top-level field by field, the later entry winning. `sharing` is one
field: a claim that switches the strategy replaces the class's whole sharing block.

GpuConfig::

    sharing:
      strategy: TimeSlicing | MPS                      # required inside sharing
      timeSlicingConfig: {interval: Default|Short|Medium|Long}   # only with TimeSlicing
      mpsConfig:                                               # only with MPS
        defaultActiveThreadPercentage: 1..100
        defaultPinnedMemoryLimit: <quantity> > 0, at most the memory the device/share has

NicConfig::

    mtu: 576..9216
    vlan: 1..4094
    rateLimit: <quantity> > 0, at most the bandwidth the share consumed (the device's
               bandwidth for an exclusive NIC); a share cannot be promised more than the
               scheduler reserved for it
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.api import format_quantity

API_GROUP = "simdra.dra.example.com"
API_VERSION = f"{API_GROUP}/v1alpha1"

TIME_SLICING = "TimeSlicing"
MPS = "MPS"
SHARING_STRATEGIES = (TIME_SLICING, MPS)
TIME_SLICE_INTERVALS = ("Default", "Short", "Medium", "Long")
MTU_RANGE = (576, 9216)
VLAN_RANGE = (1, 4094)
THREAD_PERCENTAGE_RANGE = (1, 100)


@dataclass(frozen=True)
class TimeSlicing:
    """Settings of the TimeSlicing strategy."""

    interval: str | None = None


@dataclass(frozen=True)
class Mps:
    """Settings of the MPS (space partitioning) strategy."""

    default_active_thread_percentage: int | None = None
    default_pinned_memory_limit: Fraction | None = None


@dataclass(frozen=True)
class GpuSharing:
    """How the containers that get one GPU (or GPU share) use it together."""

    strategy: str
    time_slicing: TimeSlicing | None = None
    mps: Mps | None = None


@dataclass(frozen=True)
class GpuConfig:
    """kind GpuConfig: configures devices of type `gpu`."""

    sharing: GpuSharing | None = None

    KIND = "GpuConfig"
    DEVICE_TYPE = "gpu"

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form (only fields that are set)."""
        out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": self.KIND}
        if self.sharing is not None:
            sharing: dict[str, Any] = {"strategy": self.sharing.strategy}
            if self.sharing.time_slicing is not None:
                sharing["timeSlicingConfig"] = _set_fields(
                    {"interval": self.sharing.time_slicing.interval}
                )
            if self.sharing.mps is not None:
                mps = self.sharing.mps
                sharing["mpsConfig"] = _set_fields(
                    {
                        "defaultActiveThreadPercentage": mps.default_active_thread_percentage,
                        "defaultPinnedMemoryLimit": _quantity(mps.default_pinned_memory_limit),
                    }
                )
            out["sharing"] = sharing
        return out


@dataclass(frozen=True)
class NicConfig:
    """kind NicConfig: configures devices of type `nic`."""

    mtu: int | None = None
    vlan: int | None = None
    rate_limit: Fraction | None = None

    KIND = "NicConfig"
    DEVICE_TYPE = "nic"

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form (only fields that are set)."""
        body = _set_fields(
            {"mtu": self.mtu, "vlan": self.vlan, "rateLimit": _quantity(self.rate_limit)}
        )
        return {"apiVersion": API_VERSION, "kind": self.KIND, **body}


DeviceConfig = GpuConfig | NicConfig
def _set_fields(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _quantity(value: Fraction | None) -> str | None:
    return None if value is None else format_quantity(value)
