"""Which discovered devices the sysfs backend publishes (pure).

Not every display function is a GPU a workload wants, nor every physical NIC one it may
share: by default the backend leaves out

- console displays: VGA-compatible functions (class 0x0300) of the vendors in
  `CONSOLE_DISPLAY_VENDORS`, i.e. a server's BMC video (ASPEED, Matrox G200) or a
  virtual machine's emulated screen. NVIDIA, AMD and Intel display functions stay;
- the node's uplink: the interfaces that carry a default route, and the interfaces below
  them (bond slaves, bridge ports, VLAN parents), found by `simdra._driver.kinds.sysfs.routes`.

`--sysfs-deny` and `--sysfs-allow` refine that by selectors (`pci:<address>`,
`vendor:<id>`, `iface:<name>`): a denied device is never published; an allowed one is
published even where a default rule would leave it out. Deny wins over allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from simdra._driver.kinds.sysfs.nics import NicFacts
from simdra.sysfs import PciFunction, Selector

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
