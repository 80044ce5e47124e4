"""simdra: a library for Kubernetes DRA kubelet plugins in Python, and the plugin built on it.

A driver author declares a device kind and runs the plugin with it::

    import simdra

    class CryptoKind(simdra.DeviceKind):
        \"\"\"Simulated crypto accelerators.\"\"\"

        name = "crypto"
        profiles = (simdra.FakeProfile("crypto", build=crypto_device),)

    def main() -> None:
        simdra.main(kinds=(CryptoKind,))  # the `simdra` command, CryptoKind registered

The plugin does the rest: registration with the kubelet, the DRA and health services,
ResourceSlice publishing, prepare and unprepare with durable records, CDI specs, the
shared-capacity ledger, metrics. Those parts are importable one by one from
`simdra.runtime`; the test harness is `simdra.testing`; tolerant sysfs readers for
discovering real hardware are in `simdra.sysfs`.

This module and those three are the public API: the names in their `__all__` keep
working across minor releases (tests/test_public_api.py fails when one disappears or
changes its signature). Everything under `simdra._driver` is private.
"""

from __future__ import annotations

from collections.abc import Sequence

from simdra._driver.core.quantity import (
    QuantityError,
    ceil_int,
    format_quantity,
    parse_quantity,
    quantity_text,
)
from simdra._driver.core.validation import FieldError, validate_device
from simdra._driver.devices.backend import BackendContext, DeviceBackend
from simdra._driver.devices.config_handler import (
    ConfigError,
    ConfigHandler,
    ConfigTarget,
    FieldReader,
)
from simdra._driver.devices.kind import (
    DeviceKind,
    FakeProfile,
    ProfileBuild,
    ProfileContext,
    ProfileDevices,
)
from simdra._driver.devices.kind_registry import KindSet
from simdra._driver.devices.model import JSON, Device, Inventory, Pool
from simdra._driver.devices.standard_attributes import (
    NUMA_NODE,
    PCI_BUS_ID,
    PCIE_ROOT,
    numa_span_attributes,
    scalar_attributes,
    simulated_topology,
    topology_attributes,
)
from simdra._driver.devices.uuids import stable_uuid

__all__ = [
    "JSON",
    "NUMA_NODE",
    "PCIE_ROOT",
    "PCI_BUS_ID",
    "BackendContext",
    "ConfigError",
    "ConfigHandler",
    "ConfigTarget",
    "Device",
    "DeviceBackend",
    "DeviceKind",
    "FakeProfile",
    "FieldError",
    "FieldReader",
    "Inventory",
    "KindSet",
    "Pool",
    "ProfileBuild",
    "ProfileContext",
    "ProfileDevices",
    "QuantityError",
    "ceil_int",
    "format_quantity",
    "main",
    "numa_span_attributes",
    "parse_quantity",
    "quantity_text",
    "scalar_attributes",
    "simulated_topology",
    "stable_uuid",
    "topology_attributes",
    "validate_device",
]


def main(argv: Sequence[str] | None = None, kinds: Sequence[type[DeviceKind]] = ()) -> int:
    """The `simdra` command line (`run`, `demo`, `deviceclasses`, ...) with `kinds`
    registered next to simdra's own; returns the exit status.

    Example (a driver's console script)::

        def plugin_main() -> None:
            raise SystemExit(simdra.main(kinds=(CryptoKind,)))

    The kinds must be importable by module and name (defined at module level), because
    `simdra demo` and the test harness start the plugin as a separate process.
    """
    from simdra._driver.cli import main as cli_main
    from simdra._driver.cli.kinds import with_kinds

    return cli_main(with_kinds(argv, kinds))
