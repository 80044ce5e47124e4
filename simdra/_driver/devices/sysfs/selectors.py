"""Device selectors of sysfs discovery (`--sysfs-allow`, `--sysfs-deny`): `pci:<address>`,
`vendor:<id>`, `iface:<name>`, parsed and normalised (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SELECTOR_KEYS = ("pci", "vendor", "iface")
_PCI_ADDRESS = re.compile(r"^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_VENDOR = re.compile(r"^(?:0x)?([0-9a-f]{1,4})$")
_IFACE = re.compile(r"^[^\s/:,]{1,15}$")  # the kernel's IFNAMSIZ and dev_valid_name


@dataclass(frozen=True)
class Selector:
    """One `key:value` of --sysfs-allow/--sysfs-deny, normalised (`pci:0000:3b:00.0`,
    `vendor:0x10de`, `iface:eth1`)."""

    key: str
    value: str

    def __str__(self) -> str:
        return f"{self.key}:{self.value}"


def parse_selectors(text: str) -> tuple[Selector, ...]:
    """A comma list of selectors (empty text: none); ValueError names the first bad one."""
    items = [item.strip() for item in text.split(",")] if text.strip() else []
    return tuple(parse_selector(item) for item in items)


def parse_selector(item: str) -> Selector:
    """One `pci:<[domain:]bus:dev.fn>`, `vendor:<hex id>` or `iface:<name>` selector."""
    key, sep, value = item.partition(":")
    key = key.strip().lower()
    if not sep or key not in SELECTOR_KEYS:
        raise ValueError(f"{item!r} is not key:value with key one of {', '.join(SELECTOR_KEYS)}"
                         " (e.g. pci:0000:3b:00.0, vendor:0x10de, iface:eth1)")
    if key == "pci":
        match = _PCI_ADDRESS.match(value.lower())
        if match is None:
            raise ValueError(f"{item!r} is not a PCI address like 0000:3b:00.0")
        domain, bus, device, function = match.groups()
        return Selector("pci", f"{domain or '0000'}:{bus}:{device}.{function}")
    if key == "vendor":
        vendor = _VENDOR.match(value.lower())
        if vendor is None:
            raise ValueError(f"{item!r} is not a PCI vendor id like 0x10de")
        return Selector("vendor", f"0x{int(vendor[1], 16):04x}")
    if not _IFACE.match(value) or value in (".", ".."):
        raise ValueError(f"{item!r} is not a network interface name (1-15 characters, "
                         "no space, / or :)")
    return Selector("iface", value)
