"""A discovered device before its final name is settled (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simdra._driver.api import JSON, Device, topology_attributes
from simdra.sysfs import BDF, PciFunction, id_text, int_attr, string_attr


@dataclass(frozen=True)
class DeviceDraft:
    """A device's published form minus its name, plus the name it asks for.

    `identity` (PCI address or interface name) breaks ties between equal names.
    """

    name: str
    identity: str
    spec: JSON
    container_edits: JSON = field(default_factory=dict)

    def finish(self, name: str) -> Device:
        """The Device under its final name; `name` comes first in the published JSON."""
        return Device(spec={"name": name, **self.spec}, container_edits=self.container_edits)


def pci_attributes(function: PciFunction) -> dict[str, Any]:
    """Attributes every PCI-backed device carries: identity, topology, bound driver."""
    attrs: dict[str, Any] = {}
    if function.vendor_name:
        attrs["vendor"] = string_attr(function.vendor_name)
    for key, value in (("vendorID", function.vendor_id), ("deviceID", function.device_id)):
        text = id_text(value)
        if text:
            attrs[key] = string_attr(text)
    if function.kernel_driver:
        attrs["kernelDriver"] = string_attr(function.kernel_driver)
    if function.numa_node is not None:  # simdra's own name, kept next to the standard one
        attrs["numaNode"] = int_attr(function.numa_node)
    bus_id = function.address if BDF.match(function.address) else None
    attrs.update(topology_attributes(function.numa_node, function.pcie_root, bus_id))
    return attrs
