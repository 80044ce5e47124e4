"""Builders of fake sysfs (and /dev) trees shaped like the kernel's, for tests and benches.

Real directories live under `<sys>/devices/pci<domain>:<bus>/...` and
`<sys>/devices/virtual/net/...`; `bus/pci/devices/*` and `class/net/*` are relative
symlinks into them, and a netdev's `device` links back to its parent device, just as a
kernel lays them out, so path resolution in the backend is exercised for real.
"""

from __future__ import annotations

import os
from pathlib import Path

GIB = 2**30


class SysfsTree:
    """A fake sysfs tree at `<base>/sys` with device nodes at `<base>/dev` and route
    tables under `<base>/proc/1/net`."""

    def __init__(self, base: Path) -> None:
        self.sys = base / "sys"
        self.dev = base / "dev"
        self.proc = base / "proc"
        for directory in (self.sys / "bus/pci/devices", self.sys / "class/net",
                          self.sys / "devices/virtual/net", self.dev):
            directory.mkdir(parents=True, exist_ok=True)

    def pci_function(self, address: str, *, class_code: int, vendor: int, device: int,
                     numa_node: int = -1, driver: str | None = None,
                     bridge: str | None = None) -> Path:
        """A PCI function below its root complex (and an optional bridge function), linked
        from `bus/pci/devices`; returns its real directory."""
        root = bridge or address  # the root complex is named after the top bus
        domain, bus = root.split(":")[:2]
        parent = self.sys / "devices" / f"pci{domain}:{bus}"
        if bridge:
            if not (parent / bridge).exists():
                self.pci_function(bridge, class_code=0x060400, vendor=0x8086,
                                  device=0x2030, driver="pcieport")
            parent = parent / bridge
        path = parent / address
        path.mkdir(parents=True)
        _write(path / "class", f"0x{class_code:06x}")
        _write(path / "vendor", f"0x{vendor:04x}")
        _write(path / "device", f"0x{device:04x}")
        _write(path / "numa_node", str(numa_node))
        if driver:
            driver_dir = self.sys / "bus/pci/drivers" / driver
            driver_dir.mkdir(parents=True, exist_ok=True)
            _link(path / "driver", driver_dir)
        _link(self.sys / "bus/pci/devices" / address, path)
        return path

    def gpu(self, address: str, *, vendor: int = 0x10DE, device: int = 0x2330,
            numa_node: int = -1, driver: str | None = "nvidia", card: int | None = None,
            vram_bytes: int | None = None, class_code: int = 0x030200,
            bridge: str | None = None) -> Path:
        """A display-class function; `card` N adds drm/cardN and drm/renderD(128+N) plus
        their /dev/dri nodes; `vram_bytes` writes amdgpu's mem_info_vram_total."""
        path = self.pci_function(address, class_code=class_code, vendor=vendor,
                                 device=device, numa_node=numa_node, driver=driver,
                                 bridge=bridge)
        if card is not None:
            for node in (f"card{card}", f"renderD{128 + card}"):
                (path / "drm" / node).mkdir(parents=True)
                _link(path / "drm" / node / "device", path)
                (self.dev / "dri").mkdir(exist_ok=True)
                (self.dev / "dri" / node).touch()
        if vram_bytes is not None:
            _write(path / "mem_info_vram_total", str(vram_bytes))
        return path

    def nic(self, interface: str, *, address: str | None = None, mac: str = "",
            mtu: int = 1500, speed: int | None = None, numa_node: int = -1,
            vendor: int = 0x15B3, device: int = 0x1017, driver: str = "mlx5_core",
            via_child: str | None = None, unreadable_speed: bool = False) -> Path:
        """A physical interface of a new PCI function at `address` (its netdev below the
        function, or below a child device such as `virtio0` when `via_child`), or with
        `address=None` a virtual one under devices/virtual/net without a `device` link."""
        if address is None:
            path = self.sys / "devices/virtual/net" / interface
            path.mkdir(parents=True)
        else:
            owner = self.pci_function(address, class_code=0x020000, vendor=vendor,
                                      device=device, numa_node=numa_node, driver=driver)
            if via_child:
                owner = owner / via_child
                owner.mkdir()
            path = owner / "net" / interface
            path.mkdir(parents=True)
            _link(path / "device", owner)
        _write(path / "address", mac or _mac_for(interface))
        _write(path / "mtu", str(mtu))
        _write(path / "type", "772" if interface == "lo" else "1")
        if unreadable_speed:
            (path / "speed").mkdir()  # reading fails with an OSError, like EINVAL does
        elif speed is not None:
            _write(path / "speed", str(speed))
        _link(self.sys / "class/net" / interface, path)
        return path

    def upper(self, interface: str, *lowers: str) -> Path:
        """A virtual interface (bond, bridge, VLAN) over `lowers`, linked as the kernel
        links them: `lower_<name>` in the upper's directory, `upper_<name>` in each lower."""
        path = self.nic(interface)
        for lower in lowers:
            lower_path = (self.sys / "class/net" / lower).resolve()
            _link(path / f"lower_{lower}", lower_path)
            _link(lower_path / f"upper_{interface}", path)
        return path

    def routes(self, ipv4_default: tuple[str, ...] = (), ipv6_default: tuple[str, ...] = (),
               ) -> None:
        """Route tables as the kernel prints them, with default routes through the given
        interfaces next to the routes every host has (a subnet route, IPv6 link-local,
        the unreachable ::/0 on lo) that are not default routes."""
        net = self.proc / "1" / "net"
        net.mkdir(parents=True, exist_ok=True)
        ipv4 = [_IPV4_HEADER, _ipv4_row("lo", "0000007F", "000000FF", flags=0x0001)]
        ipv4 += [_ipv4_row(name, "00000000", "00000000", flags=0x0003) for name in ipv4_default]
        ipv4 += [_ipv4_row(name, "000200C0", "00FFFFFF", flags=0x0001) for name in ipv4_default]
        ipv6 = [_ipv6_row("fe80" + "0" * 28, 0x40, "lo", flags=0x0001),
                _ipv6_row("0" * 32, 0, "lo", flags=0x00200200)]
        ipv6 += [_ipv6_row("0" * 32, 0, name, flags=0x00000003) for name in ipv6_default]
        (net / "route").write_text("".join(f"{row}\n" for row in ipv4))
        (net / "ipv6_route").write_text("".join(f"{row}\n" for row in ipv6))

    def cpus(self, online: str, nodes: dict[int, str]) -> None:
        """CPU lists as the kernel writes them: `online` (e.g. "0-7") and each NUMA
        node's `cpulist` (node number -> list)."""
        for path, text in [("cpu/online", online),
                           *((f"node/node{n}/cpulist", cpus) for n, cpus in nodes.items())]:
            (self.sys / "devices/system" / path).parent.mkdir(parents=True, exist_ok=True)
            _write(self.sys / "devices/system" / path, text)

    def nvidia_control_nodes(self, *names: str) -> None:
        """Device nodes such as `nvidiactl` under the fake /dev."""
        for name in names:
            (self.dev / name).touch()


def gpu_node(tree: SysfsTree) -> SysfsTree:
    """Two NVIDIA GPUs on two root complexes (one behind a bridge), an Intel iGPU with a
    DRM card, an AMD GPU with VRAM size, and a non-display PCI device."""
    tree.gpu("0000:3b:00.0", numa_node=0, bridge="0000:3a:00.0")
    tree.gpu("0000:86:00.0", numa_node=1)
    tree.gpu("0000:00:02.0", vendor=0x8086, device=0x46A6, driver="i915", card=0,
             class_code=0x030000)
    tree.gpu("0000:c1:00.0", vendor=0x1002, device=0x740F, driver="amdgpu", card=1,
             vram_bytes=64 * GIB, numa_node=1)
    tree.pci_function("0000:00:1f.2", class_code=0x010601, vendor=0x8086, device=0xA352,
                      driver="ahci")
    return tree


def nic_node(tree: SysfsTree) -> SysfsTree:
    """Physical NICs at 10000 and 25000 Mb/s, one of unknown speed, one whose speed cannot
    be read, plus loopback, a bridge and a veth."""
    tree.nic("enp94s0f0", address="0000:5e:00.0", speed=10000, numa_node=0)
    tree.nic("enp94s0f1", address="0000:5e:00.1", speed=25000, numa_node=0, mtu=9000)
    tree.nic("eth0", address="0000:00:03.0", speed=-1, vendor=0x1AF4, device=0x1041,
             driver="virtio-pci", via_child="virtio2")
    tree.nic("eno1", address="0000:00:19.0", unreadable_speed=True, vendor=0x8086,
             device=0x15B8, driver="e1000e")
    tree.nic("lo", mac="00:00:00:00:00:00", mtu=65536)
    tree.nic("br0")
    tree.nic("veth1a2b3c")
    return tree


_IPV4_HEADER = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"


def _ipv4_row(iface: str, destination: str, mask: str, *, flags: int) -> str:
    gateway = "010200C0" if flags & 0x0002 else "00000000"
    return "\t".join([iface, destination, gateway, f"{flags:04X}", "0", "0", "0", mask,
                      "0", "0", "0"])


def _ipv6_row(destination: str, length: int, iface: str, *, flags: int) -> str:
    zero = "0" * 32
    return " ".join([destination, f"{length:02x}", zero, "00", zero, "00000400", "00000001",
                     "00000000", f"{flags:08x}", f"{iface:>8}"])


def _mac_for(interface: str) -> str:
    raw = sum(interface.encode()) % 256
    return f"02:00:00:00:{len(interface):02x}:{raw:02x}"


def _write(path: Path, text: str) -> None:
    path.write_text(text + "\n")


def _link(link: Path, target: Path) -> None:
    """A relative symlink, as sysfs uses, so the tree can be moved or copied."""
    os.symlink(os.path.relpath(target, link.parent), link)
