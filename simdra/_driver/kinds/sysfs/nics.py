"""NICs: network interfaces under `<root>/class/net` that a device backs.

An interface is physical when its sysfs entry has a `device` link and does not live under
`devices/virtual` (bridges, veths, bonds, tunnels do). Loopback is never published. Link
speed becomes a consumable `bandwidth` capacity in bits per second that many claims share.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simdra._driver.api import JSON, format_quantity
from simdra._driver.kinds.sysfs.draft import DeviceDraft, pci_attributes
from simdra.sysfs import (
    PciFunction,
    bool_attr,
    follow,
    int_attr,
    label,
    owning_function,
    read_int,
    read_text,
    resolve,
    string_attr,
)

log = logging.getLogger(__name__)

ARPHRD_LOOPBACK = 772  # the `type` of a loopback interface (linux/if_arp.h)
MEGABIT = 10**6
# Shares are sized in whole megabits: the smallest useful slice of a link.
BANDWIDTH_POLICY: JSON = {"default": "1M", "validRange": {"min": "1M", "step": "1M"}}


@dataclass(frozen=True)
class NicFacts:
    """What is known about one interface; None marks a fact the kernel did not give."""

    interface: str
    virtual: bool
    mac: str | None = None
    mtu: int | None = None
    speed_mbps: int | None = None  # None when unknown (down link, virtual, -1)
    function: PciFunction | None = None


# interface name -> facts from another source, to fill what sysfs left unknown
NicFallback = Callable[[str], NicFacts | None]


def read_nics(sysfs_root: Path, functions: Mapping[Path, PciFunction],
              include_virtual: bool, fallback: NicFallback | None = None) -> list[NicFacts]:
    """Facts for every interface to publish, in interface-name order."""
    virtual_dir = resolve(sysfs_root / "devices" / "virtual")
    class_dir = resolve(sysfs_root / "class" / "net")
    if class_dir is None:
        return []
    found = []
    for name in _sorted_names(class_dir):
        facts = read_nic(class_dir, name, functions, virtual_dir)
        if facts is None or (facts.virtual and not include_virtual):
            continue
        if fallback is not None:
            facts = fill_unknown(facts, fallback(facts.interface))
        found.append(facts)
    return found


def read_nic(class_dir: Path, name: str, functions: Mapping[Path, PciFunction],
             virtual_dir: Path | None) -> NicFacts | None:
    """Facts of interface `name` of the (canonical) `class/net` directory, or None for
    loopback and interfaces gone mid-scan."""
    path = follow(class_dir, name)
    if path is None or _is_loopback(name, path):
        return None
    device = follow(path, "device")
    under_virtual = virtual_dir is not None and path.is_relative_to(virtual_dir)
    speed = read_int(path / "speed")  # a down link refuses the read (EINVAL): unknown
    return NicFacts(
        interface=name,
        virtual=device is None or under_virtual,
        mac=read_text(path / "address") or None,
        mtu=read_int(path / "mtu"),
        speed_mbps=speed if speed is not None and speed > 0 else None,
        function=owning_function(device, functions) if device is not None else None,
    )


def fill_unknown(facts: NicFacts, other: NicFacts | None) -> NicFacts:
    """`facts` with its unknown MAC, MTU and speed taken from `other` when it knows them."""
    if other is None:
        return facts
    return replace(
        facts,
        mac=facts.mac or other.mac,
        mtu=facts.mtu if facts.mtu is not None else other.mtu,
        speed_mbps=facts.speed_mbps or other.speed_mbps,
    )


def nic_draft(facts: NicFacts) -> DeviceDraft:
    """One NIC's published form (pure). NICs are always shareable; a known link speed
    bounds what the shares may consume together."""
    attrs: dict[str, Any] = {"type": string_attr("nic")}
    if facts.function is not None:
        attrs.update(pci_attributes(facts.function))
    attrs["interfaceName"] = string_attr(facts.interface)
    attrs["virtual"] = bool_attr(facts.virtual)
    if facts.mac:
        attrs["macAddress"] = string_attr(facts.mac)
    if facts.mtu is not None:
        attrs["mtu"] = int_attr(facts.mtu)
    spec: JSON = {"allowMultipleAllocations": True, "attributes": attrs}
    bandwidth = bandwidth_capacity(facts.speed_mbps)
    if bandwidth:
        spec["capacity"] = {"bandwidth": bandwidth}
    return DeviceDraft(name=label("nic", facts.interface), identity=facts.interface, spec=spec)


def bandwidth_capacity(speed_mbps: int | None) -> JSON | None:
    """Link speed as a `bandwidth` capacity in bits per second (25000 Mb/s -> `25G`),
    or None when the speed is unknown.

    The request policy (default and minimum 1M, step 1M) needs room for one step above
    the minimum; a link slower than 2 Mb/s gets the capacity without a policy.
    """
    if not speed_mbps or speed_mbps <= 0:
        return None
    capacity: JSON = {"value": format_quantity(speed_mbps * MEGABIT)}
    if speed_mbps >= 2:
        capacity["requestPolicy"] = {
            "default": BANDWIDTH_POLICY["default"],
            "validRange": dict(BANDWIDTH_POLICY["validRange"]),
        }
    return capacity


def _is_loopback(name: str, path: Path) -> bool:
    return name == "lo" or read_int(path / "type") == ARPHRD_LOOPBACK


def _sorted_names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []
