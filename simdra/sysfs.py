"""Helpers for discovering real devices in sysfs, as simdra's own backends do.

The readers never raise for odd hardware: a file that is missing, unreadable or vanishes
mid-scan (hot unplug) reads as None. The name helpers make the stable DNS-label device
names that claims, records and CDI specs rely on across restarts; the PCI helpers list
a tree's PCI functions; the change stamps make idle rescans cheap (a backend's
`change_stamp()`); the selectors are the `pci:`/`vendor:`/`iface:` allow and deny lists.

Example::

    from simdra.sysfs import label, read_text, string_attr

    state = read_text(card / "state") or "unknown"            # "operating", None -> unknown
    name = label("fpga", "0000:3b:00.0")                     # "fpga-0000-3b-00-0"
    attributes = {"state": string_attr(state)}               # {"string": ...}, <= 64 chars
"""

from __future__ import annotations

from simdra._driver.devices.stamps import file_stamp, link_targets_stamp, listing_stamp
from simdra._driver.devices.sysfs.files import follow, link_name, read_int, read_text, resolve
from simdra._driver.devices.sysfs.names import label, unique_names
from simdra._driver.devices.sysfs.pci import (
    BDF,
    PciFunction,
    id_text,
    list_pci_functions,
    owning_function,
)
from simdra._driver.devices.sysfs.selectors import Selector, parse_selectors
from simdra._driver.devices.sysfs.values import (
    bool_attr,
    int_attr,
    string_attr,
    to_semver,
    version_attr,
)

__all__ = [
    "BDF",
    "PciFunction",
    "Selector",
    "bool_attr",
    "file_stamp",
    "follow",
    "id_text",
    "int_attr",
    "label",
    "link_name",
    "link_targets_stamp",
    "list_pci_functions",
    "listing_stamp",
    "owning_function",
    "parse_selectors",
    "read_int",
    "read_text",
    "resolve",
    "string_attr",
    "to_semver",
    "unique_names",
    "version_attr",
]
