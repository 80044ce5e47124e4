"""Which discovered devices the sysfs backend publishes (pure).

Not every display function is a GPU a workload wants, nor every physical NIC one it may
share: by default the backend leaves out

- console displays: VGA-compatible functions (class 0x0300) of the vendors in
  `CONSOLE_DISPLAY_VENDORS`, i.e. a server's BMC video (ASPEED, Matrox G200) or a
  virtual machine's emulated screen. NVIDIA, AMD and Intel display functions stay;
- the node's uplink: the interfaces that carry a default route, and the interfaces below
  them (bond slaves, bridge ports, VLAN parents), found by `driver.devices.sysfs.routes`.

`--sysfs-deny` and `--sysfs-allow` refine that by selectors (`pci:<address>`,
`vendor:<id>`, `iface:<name>`): a denied device is never published; an allowed one is
published even where a default rule would leave it out. Deny wins over allow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from driver.devices.sysfs.nics import NicFacts
from driver.devices.sysfs.pci import PciFunction

# Vendors whose VGA-compatible functions drive a console, not computations (PCI ids):
# the one place to extend when another board's BMC shows up as a GPU.
CONSOLE_DISPLAY_VENDORS: Mapping[int, str] = {
    0x1A03: "ASPEED BMC video (AST2x00)",
    0x102B: "Matrox G200 server video (iDRAC, iLO, XClarity BMCs)",
    0x19E5: "Huawei iBMC video (Hi171x)",
    0x1D0F: "Amazon EC2 console video",
    0x1234: "QEMU/Bochs emulated video",
    0x1B36: "QEMU QXL emulated video",
    0x1013: "Cirrus Logic emulated video",
    0x15AD: "VMware SVGA emulated video",
}
VGA_CLASS = 0x0300  # base class display (0x03), subclass VGA-compatible (0x00)

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


@dataclass(frozen=True)
class Candidate:
    """A discovered device as the rules see it. `default_exclusion` is why the default
    rules leave it out (None: they keep it)."""

    pci_address: str | None = None
    vendor_id: int | None = None
    interface: str | None = None
    default_exclusion: str | None = None

    def matches(self, selector: Selector) -> bool:
        """True if `selector` names this device."""
        if selector.key == "pci":
            return self.pci_address == selector.value
        if selector.key == "vendor":
            return self.vendor_id is not None and f"0x{self.vendor_id:04x}" == selector.value
        return self.interface == selector.value


@dataclass(frozen=True)
class Rules:
    """The explicit lists; empty lists leave the default rules alone."""

    allow: tuple[Selector, ...] = ()
    deny: tuple[Selector, ...] = ()


NO_RULES = Rules()


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


def console_display_reason(class_code: int | None, vendor_id: int | None) -> str | None:
    """Why a display function is a console rather than a GPU, or None if it is a GPU."""
    if class_code is None or vendor_id is None or class_code >> 8 != VGA_CLASS:
        return None
    vendor = CONSOLE_DISPLAY_VENDORS.get(vendor_id)
    return f"console display: {vendor} (vendor 0x{vendor_id:04x})" if vendor else None


def exclusion(candidate: Candidate, rules: Rules) -> str | None:
    """Why `candidate` is not published, or None when it is."""
    denied = next((s for s in rules.deny if candidate.matches(s)), None)
    if denied is not None:
        return f"denied by --sysfs-deny {denied}"
    if candidate.default_exclusion and not any(candidate.matches(s) for s in rules.allow):
        return candidate.default_exclusion
    return None


@dataclass(frozen=True)
class Selection:
    """What to publish, and the label and reason of everything left out."""

    gpus: tuple[PciFunction, ...]
    nics: tuple[NicFacts, ...]
    excluded: tuple[tuple[str, str], ...]  # (label, reason), GPUs first


def choose(displays: Iterable[PciFunction], nics: Iterable[NicFacts],
           uplinks: Mapping[str, str], rules: Rules) -> Selection:
    """Apply the default rules (console displays; `uplinks`: interface -> reason) and
    the explicit lists to the discovered display functions and NICs."""
    gpus, kept_nics, excluded = [], [], []
    for function in displays:
        reason = exclusion(gpu_candidate(function), rules)
        if reason is None:
            gpus.append(function)
        else:
            excluded.append((f"gpu {function.address}", reason))
    for nic in nics:
        reason = exclusion(nic_candidate(nic, uplinks), rules)
        if reason is None:
            kept_nics.append(nic)
        else:
            excluded.append((f"nic {nic.interface}", reason))
    return Selection(tuple(gpus), tuple(kept_nics), tuple(excluded))


def gpu_candidate(function: PciFunction) -> Candidate:
    """A display function as the rules see it."""
    return Candidate(pci_address=function.address, vendor_id=function.vendor_id,
                     default_exclusion=console_display_reason(function.class_code,
                                                              function.vendor_id))


def nic_candidate(nic: NicFacts, uplinks: Mapping[str, str]) -> Candidate:
    """An interface as the rules see it: its PCI function's address and vendor too."""
    function = nic.function
    return Candidate(pci_address=function.address if function else None,
                     vendor_id=function.vendor_id if function else None,
                     interface=nic.interface, default_exclusion=uplinks.get(nic.interface))
