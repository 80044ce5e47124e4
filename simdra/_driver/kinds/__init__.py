"""simdra's own device kinds (GPU, NIC, FPGA, CPU, license seats) and backends (sysfs,
fpga), built like any driver author's: on the public API's names alone
(`simdra._driver.api`, `simdra.sysfs`), which an import contract checks.

The command line hands them down as objects (simdra's catalog, `simdra._driver.builtins`);
nothing below it names a kind or a backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from simdra._driver.api import DeviceKind
from simdra._driver.kinds.cpu import CpuKind
from simdra._driver.kinds.fpga import FpgaBackend, FpgaKind
from simdra._driver.kinds.gpu import GpuKind
from simdra._driver.kinds.license import LicenseKind
from simdra._driver.kinds.nic import NicKind


def _sysfs_backend() -> type:
    # Loaded when chosen: `simdra run` checks its flags before it serves the kubelet, and
    # must not pay for sysfs discovery then (nor a plugin with another backend at all).
    from simdra._driver.kinds.sysfs.backend import SysfsBackend

    return SysfsBackend


# In registration order: the order of `simdra kinds` and of the generated DeviceClasses.
BUILTIN_KINDS: tuple[type[DeviceKind], ...] = (GpuKind, NicKind, FpgaKind, CpuKind,
                                                 LicenseKind)
# `--device-backend NAME` -> the backend class, loaded when asked for.
BUILTIN_BACKENDS: Mapping[str, Callable[[], type]] = MappingProxyType(
    {"sysfs": _sysfs_backend, "fpga": lambda: FpgaBackend})
