"""Real devices from a Linux sysfs tree: display-class PCI functions as GPUs (enriched by
NVML for NVIDIA when available) and device-backed network interfaces as NICs.

The sysfs and /dev roots are parameters, so tests and containers can point the backend at
a fake tree or at the host's tree mounted elsewhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from simdra._driver.kinds.sysfs.backend import SysfsBackend

__all__ = ["SysfsBackend"]


def __getattr__(name: str) -> Any:
    # The backend loads on first use: `simdra run` checks --sysfs-allow/--sysfs-deny
    # (`selection`) before it serves the kubelet, and must not pay for the backend then.
    if name == "SysfsBackend":
        from simdra._driver.kinds.sysfs.backend import SysfsBackend

        return SysfsBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
