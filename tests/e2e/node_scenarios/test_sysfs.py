"""The sysfs backend on the node's real /sys.

What it must publish is worked out here from the host's own facts, by rules written out
again rather than imported from the driver: every display-class PCI function except the
VGA functions of console vendors (BMC and emulated video), and every interface with a
`device` link outside devices/virtual except loopback and the interfaces of the host's
default routes (with those below them: bond slaves, bridge ports, VLAN parents).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..realnode import (
    PluginDeployment,
    node_slices,
    wait,
)

SYS = Path("/sys")
ROUTES = Path("/proc/1/net")  # the host's network namespace, which the pod reads too
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
# VGA-compatible (class 0x0300) functions of these vendors are consoles, not GPUs: ASPEED,
# Matrox, Huawei iBMC, Amazon EC2, QEMU/Bochs, QEMU QXL, Cirrus Logic, VMware.
CONSOLE_VENDORS = {"0x1a03", "0x102b", "0x19e5", "0x1d0f", "0x1234", "0x1b36", "0x1013",
                   "0x15ad"}


def test_node_sysfs_overlay_publishes_the_hosts_gpus_and_nics_but_not_its_uplink(
        plugin: PluginDeployment) -> None:
    """h. The sysfs backend on the real /sys: the pod is Ready (registered), its pool is
    published and accepted by the API server, with exactly the GPUs and NICs the host's
    /sys and route tables call for; the start-up log names each device left out and why;
    no errors logged."""
    fake = re.compile(r"^(gpu|nic)-[0-9]+$")  # the fake profiles' device names
    gpus, consoles = host_gpus()
    nics, uplinks = host_nics()
    with plugin.using("sysfs"):
        slices: list = []

        def republished() -> bool:
            slices[:] = node_slices(plugin.cp, plugin.node.name)
            names = [d["name"] for s in slices for d in s["spec"].get("devices") or []]
            return bool(slices) and not any(fake.match(n) for n in names)

        wait(
            "sysfs plugin replaced the fake devices in the node's slices",
            republished,
            90,
            plugin.node.kubelet_log,
            lambda: str([d["name"] for s in slices for d in s["spec"].get("devices") or []]),
        )
        for s in slices:
            assert s["spec"]["pool"]["resourceSliceCount"] == len(
                [x for x in slices if x["spec"]["pool"]["name"] == s["spec"]["pool"]["name"]]
            )
        # The routes the pod reads are the host's, not those of the pod's own network.
        seen = plugin.exec("python", "-c", "import os; print(open(os.environ['PROC_ROOT']"
                           " + '/1/net/route').read())")
        assert route_rows(seen) == route_rows(_read(ROUTES / "route") or "")
        published = [d for s in slices for d in s["spec"].get("devices") or []]
        assert published_gpus(published) == gpus
        assert published_nics(published) == nics
        log = plugin.logs()
    errors = [line for line in log.splitlines() if " ERROR " in line or "Traceback" in line]
    assert errors == [], errors[:3]
    left_out = [line for line in log.splitlines() if "not publishing" in line]
    expected = [f"gpu {a}: console display" for a in consoles]
    expected += [f"nic {name}: {why}" for name, why in uplinks.items()]
    assert all(any(e in line for line in left_out) for e in expected), (expected, left_out)
    assert bool(left_out) == bool(expected), left_out


def host_gpus() -> tuple[dict[str, dict[str, str]], list[str]]:
    """PCI address -> vendor and device id of each GPU to publish; console addresses."""
    gpus, consoles = {}, []
    for address in sorted(os.listdir(SYS / "bus/pci/devices")):
        function = SYS / "bus/pci/devices" / address
        class_code = int(_read(function / "class") or "0", 16)
        if class_code >> 16 != 0x03:
            continue
        vendor = _read(function / "vendor")
        if class_code >> 8 == 0x0300 and vendor in CONSOLE_VENDORS:
            consoles.append(address)
        else:
            gpus[address] = {"vendorID": vendor, "deviceID": _read(function / "device")}
    return gpus, consoles


def host_nics() -> tuple[dict[str, dict[str, object]], dict[str, str]]:
    """Interface -> MAC and MTU of each NIC to publish; uplink interface -> the reason
    the plugin's log must give for leaving it out."""
    physical = {}
    for name in sorted(os.listdir(SYS / "class/net")):
        path = (SYS / "class/net" / name).resolve()
        if name == "lo" or not (path / "device").exists() or "/devices/virtual/" in str(path):
            continue
        physical[name] = {"macAddress": _read(path / "address"),
                          "mtu": int(_read(path / "mtu") or "0")}
    uplinks = {}
    for top in default_route_interfaces():
        below = lower_interfaces(top)
        uplinks.update({name: "below" for name in below if name in physical})
        if top in physical:
            uplinks[top] = "carries the node's default route"
    return {n: f for n, f in physical.items() if n not in uplinks}, uplinks


def default_route_interfaces() -> set[str]:
    """Interfaces of the usable (up, not reject) default routes, IPv4 and IPv6."""
    found = set()
    for line in (_read(ROUTES / "route") or "").splitlines()[1:]:
        iface, destination, _gateway, flags, *rest = line.split()
        if int(destination, 16) == 0 and int(rest[3], 16) == 0 and int(flags, 16) & 1:
            found.add(iface)
    for line in (_read(ROUTES / "ipv6_route") or "").splitlines():
        fields = line.split()
        flags = int(fields[8], 16)
        if int(fields[0], 16) == 0 and fields[1] == "00" and flags & 1 and not flags & 0x200:
            found.add(fields[9])
    return found - {"lo"}


def route_rows(table: str) -> set[tuple[str, ...]]:
    """Interface, destination, gateway and mask of each IPv4 route (no counters)."""
    rows = [line.split() for line in table.splitlines()[1:] if line.strip()]
    return {(r[0], r[1], r[2], r[7]) for r in rows}


def lower_interfaces(upper: str) -> set[str]:
    """Everything below `upper` through its `lower_*` links."""
    found: set[str] = set()
    pending = [upper]
    while pending:
        entries = os.listdir(SYS / "class/net" / pending.pop())
        lowers = {e[len("lower_"):] for e in entries if e.startswith("lower_")} - found
        found |= lowers
        pending += lowers
    return found


def published_gpus(devices: list[dict]) -> dict[str, dict[str, str]]:
    gpus = [_values(d) for d in devices if _values(d).get("type") == "gpu"]
    return {a[PCI_BUS_ID]: {"vendorID": a["vendorID"], "deviceID": a["deviceID"]}
            for a in gpus}


def published_nics(devices: list[dict]) -> dict[str, dict[str, object]]:
    nics = [_values(d) for d in devices if _values(d).get("type") == "nic"]
    assert all(a["virtual"] is False for a in nics), nics
    return {a["interfaceName"]: {"macAddress": a.get("macAddress"), "mtu": a.get("mtu")}
            for a in nics}


def _values(device: dict) -> dict[str, object]:
    """Attribute name -> plain value."""
    return {k: next(iter(v.values())) for k, v in device.get("attributes", {}).items()}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
