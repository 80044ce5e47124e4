"""Real devices from a Linux sysfs tree: display-class PCI functions as GPUs (enriched by
NVML for NVIDIA when available) and device-backed network interfaces as NICs.

The sysfs and /dev roots are parameters, so tests and containers can point the backend at
a fake tree or at the host's tree mounted elsewhere.
"""

from driver.devices.sysfs.backend import SysfsBackend

__all__ = ["SysfsBackend"]
