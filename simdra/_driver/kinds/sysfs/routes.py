"""The node's uplink: interfaces that carry a default route, and those below them.

Routes come from procfs: `<proc-root>/1/net/route` (IPv4) and `.../ipv6_route`, the
tables of PID 1's network namespace. That is the host's even from a pod with its own
network namespace, as long as the pod mounts the host's /proc (the sysfs deploy
overlay mounts it at /host/proc); a pod's own /proc/net would show the pod's routes.
An interface under an upper one (a bond's slave, a bridge's port, a VLAN's parent) has
a `lower_<name>` link in the upper's sysfs directory; those count as uplink too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from simdra.sysfs import read_text

RTF_UP = 0x0001  # linux/route.h: the route is usable
RTF_REJECT = 0x0200  # an unreachable route, such as the kernel's ::/0 on lo
_LOWER = "lower_"


def ipv4_default_interfaces(table: str) -> list[str]:
    """Interfaces of the usable default routes in /proc/net/route text (pure).

    Columns: Iface Destination Gateway Flags RefCnt Use Metric Mask ..., hex numbers.
    """
    found = []
    for fields in _rows(table, skip_header=True):
        if len(fields) < 8:
            continue
        iface, destination, flags, mask = fields[0], fields[1], fields[3], fields[7]
        if _is_zero(destination) and _is_zero(mask) and _usable(flags) and iface != "lo":
            found.append(iface)
    return _unique(found)


def ipv6_default_interfaces(table: str) -> list[str]:
    """Interfaces of the usable default routes in /proc/net/ipv6_route text (pure).

    Columns: destination, prefix length, source, source prefix length, next hop, metric,
    refcount, use, flags, interface; no header.
    """
    found = []
    for fields in _rows(table, skip_header=False):
        if len(fields) < 10:
            continue
        destination, length, flags, iface = fields[0], fields[1], fields[8], fields[9]
        if _is_zero(destination) and _is_zero(length) and _usable(flags) and iface != "lo":
            found.append(iface)
    return _unique(found)


def uplink_reasons(defaults: Mapping[str, str],
                   lowers: Callable[[str], Iterable[str]]) -> dict[str, str]:
    """interface -> why it is uplink: each default-route interface (`defaults` maps it to
    the families routed) and everything below it through `lowers` (pure but for
    `lowers`; cycles, which the kernel forbids, are cut anyway)."""
    reasons: dict[str, str] = {}
    for top, families in defaults.items():
        reasons.setdefault(top, f"carries the node's default route ({families})")
        pending = [top]
        while pending:
            upper = pending.pop()
            for lower in sorted(lowers(upper)):
                if lower not in reasons:
                    reasons[lower] = f"below {top}, which carries the node's default route"
                    pending.append(lower)
    return reasons


def read_default_routes(proc_root: Path) -> dict[str, str] | None:
    """interface -> "IPv4", "IPv6" or "IPv4, IPv6" for the default routes of PID 1's
    network namespace, or None when neither table can be read."""
    net = proc_root / "1" / "net"
    ipv4, ipv6 = read_text(net / "route"), read_text(net / "ipv6_route")
    if ipv4 is None and ipv6 is None:
        return None
    families: dict[str, list[str]] = {}
    for family, names in (("IPv4", ipv4_default_interfaces(ipv4 or "")),
                          ("IPv6", ipv6_default_interfaces(ipv6 or ""))):
        for name in names:
            families.setdefault(name, []).append(family)
    return {name: ", ".join(found) for name, found in families.items()}


def sysfs_lowers(sysfs_root: Path) -> Callable[[str], list[str]]:
    """The `lower_*` links of an interface's directory under `<sysfs>/class/net`."""
    class_dir = sysfs_root / "class" / "net"

    def lowers(interface: str) -> list[str]:
        try:
            entries = os.listdir(class_dir / interface)
        except OSError:
            return []
        return [e[len(_LOWER):] for e in entries if e.startswith(_LOWER)]

    return lowers


def absent_interfaces(sysfs_root: Path, names: Iterable[str]) -> list[str]:
    """The `names` that `<sysfs>/class/net` lacks: routes of another network namespace."""
    class_dir = sysfs_root / "class" / "net"
    return sorted(n for n in names if not os.path.lexists(class_dir / n))


def _rows(table: str, *, skip_header: bool) -> list[list[str]]:
    lines = table.splitlines()[1 if skip_header else 0:]
    return [line.split() for line in lines if line.strip()]


def _is_zero(hex_text: str) -> bool:
    try:
        return int(hex_text, 16) == 0
    except ValueError:
        return False


def _usable(flags: str) -> bool:
    try:
        value = int(flags, 16)
    except ValueError:
        return False
    return bool(value & RTF_UP) and not value & RTF_REJECT


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))
