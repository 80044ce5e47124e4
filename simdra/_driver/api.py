"""The names of simdra's public API (`simdra.__all__` less `main`), in one module below the
command line: the built-in kinds and the fleet import them from here, so they get exactly
what a driver author gets and the command line can still hand them down as objects
(`simdra` itself sits above the command line, for `simdra.main`)."""

from __future__ import annotations

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
    "numa_span_attributes",
    "parse_quantity",
    "quantity_text",
    "scalar_attributes",
    "simulated_topology",
    "stable_uuid",
    "topology_attributes",
    "validate_device",
]
