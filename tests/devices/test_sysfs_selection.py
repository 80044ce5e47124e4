"""Safe discovery: what the sysfs backend leaves out of a node's slices by default (BMC
and emulated console displays, the NICs the node's own traffic goes through) and what
--sysfs-allow / --sysfs-deny change about that; on fake sysfs and proc trees."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from simdra._driver.devices.backend import BackendContext
from simdra._driver.devices.model import Device
from simdra._driver.devices.sysfs.selectors import parse_selectors
from simdra._driver.kinds.sysfs import SysfsBackend
from simdra._driver.kinds.sysfs.nvml import NoNvml
from simdra._driver.kinds.sysfs.selection import Rules
from tests.devices.sysfs_trees import SysfsTree, gpu_node, nic_node

NODE = "server-1"
GPUS = ["gpu-0000-00-02-0", "gpu-0000-3b-00-0", "gpu-0000-86-00-0", "gpu-0000-c1-00-0"]
NICS = ["nic-eno1", "nic-enp94s0f0", "nic-enp94s0f1", "nic-eth0"]
ASPEED = "gpu-0000-03-00-0"
MATROX = "gpu-0000-04-00-0"


@pytest.fixture
def tree(tmp_path: Path) -> SysfsTree:
    """A GPU server: four GPUs (one an Intel VGA-class iGPU), a BMC's ASPEED VGA and a
    Matrox G200 on another board; four physical NICs, eth0 the default route."""
    tree = nic_node(gpu_node(SysfsTree(tmp_path)))
    tree.gpu("0000:03:00.0", vendor=0x1A03, device=0x2000, driver="ast", card=2,
             class_code=0x030000)
    tree.gpu("0000:04:00.0", vendor=0x102B, device=0x0534, driver="mgag200",
             class_code=0x030000)
    tree.routes(ipv4_default=("eth0",))
    return tree


def discover(tree: SysfsTree, allow: str = "", deny: str = "",
             proc: Path | None = None) -> dict[str, Device]:
    backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name="hw.example.com",
                           nvml=NoNvml(), proc_root=proc or tree.proc,
                           rules=Rules(parse_selectors(allow), parse_selectors(deny)))
    return {device.name: device for _, device in backend.discover().devices()}


def test_bmc_displays_and_the_default_route_nic_are_not_published(tree: SysfsTree) -> None:
    found = discover(tree)

    assert sorted(found) == sorted(GPUS + [n for n in NICS if n != "nic-eth0"])
    assert found["gpu-0000-00-02-0"].attribute("vendor") == "Intel"  # VGA class, kept


def test_an_ipv6_only_default_route_excludes_its_nic(tree: SysfsTree) -> None:
    tree.routes(ipv6_default=("eno1",))

    found = discover(tree)

    assert "nic-eno1" not in found and "nic-eth0" in found


def test_routes_that_are_not_usable_default_routes_exclude_nothing(tree: SysfsTree) -> None:
    # Loopback's routes and the kernel's unreachable ::/0 on lo only.
    tree.routes()

    assert sorted(n for n in discover(tree) if n.startswith("nic-")) == NICS


def test_the_nics_under_a_default_route_bond_are_not_published(tree: SysfsTree) -> None:
    tree.upper("bond0", "enp94s0f0", "enp94s0f1")
    tree.upper("vlan100", "bond0")  # the default route on a VLAN of the bond
    tree.routes(ipv4_default=("vlan100",))

    found = discover(tree)

    assert sorted(n for n in found if n.startswith("nic-")) == ["nic-eno1", "nic-eth0"]


@pytest.mark.parametrize(("allow", "back"), [
    ("pci:0000:03:00.0", [ASPEED]),
    ("pci:03:00.0", [ASPEED]),  # the domain defaults to 0000, as lspci prints it
    ("vendor:0x102b", [MATROX]),
    ("vendor:1A03", [ASPEED]),
    ("iface:eth0", ["nic-eth0"]),
    ("pci:0000:00:03.0", ["nic-eth0"]),  # a NIC by its PCI function
    ("vendor:0x1af4, iface:eth0 ,pci:0000:04:00.0", ["nic-eth0", MATROX]),
])
def test_allow_publishes_a_default_excluded_device(tree: SysfsTree, allow: str,
                                                   back: list[str]) -> None:
    found = discover(tree, allow=allow)

    assert sorted(found) == sorted([*GPUS, *NICS[:3], *back])


@pytest.mark.parametrize(("deny", "gone"), [
    ("pci:0000:3b:00.0", ["gpu-0000-3b-00-0"]),
    ("pci:0000:5e:00.1", ["nic-enp94s0f1"]),
    ("vendor:0x10de", ["gpu-0000-3b-00-0", "gpu-0000-86-00-0"]),
    ("vendor:0x15b3", ["nic-enp94s0f0", "nic-enp94s0f1"]),  # Mellanox NICs
    ("iface:eno1", ["nic-eno1"]),
])
def test_deny_leaves_a_device_out(tree: SysfsTree, deny: str, gone: list[str]) -> None:
    found = discover(tree, deny=deny)

    assert sorted(found) == sorted(set(GPUS + NICS[:3]) - set(gone))


def test_deny_wins_over_allow(tree: SysfsTree) -> None:
    found = discover(tree, allow="iface:eth0,vendor:0x10de", deny="pci:0000:00:03.0,"
                     "pci:0000:86:00.0")

    assert "nic-eth0" not in found and "gpu-0000-86-00-0" not in found
    assert "gpu-0000-3b-00-0" in found


def test_one_line_names_each_excluded_device_and_why(tree: SysfsTree,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name="hw.example.com",
                           nvml=NoNvml(), proc_root=tree.proc,
                           rules=Rules(deny=parse_selectors("iface:eno1")))
    with caplog.at_level(logging.INFO, logger="simdra._driver.kinds.sysfs"):
        backend.discover()
        backend.discover()  # an unchanged rescan says nothing again

    lines = [r.getMessage() for r in caplog.records if "not publishing" in r.getMessage()]
    assert len(lines) == 1, lines
    for part in ("gpu 0000:03:00.0: console display: ASPEED", "vendor 0x1a03",
                 "gpu 0000:04:00.0: console display: Matrox",
                 "nic eth0: carries the node's default route (IPv4)",
                 "nic eno1: denied by --sysfs-deny iface:eno1"):
        assert part in lines[0]


@pytest.mark.parametrize("layout", ["no-proc", "routes-of-another-namespace"])
def test_a_proc_root_without_the_hosts_routes_is_warned_about(
        tree: SysfsTree, caplog: pytest.LogCaptureFixture, layout: str) -> None:
    if layout == "no-proc":
        proc, expected = tree.proc.parent / "nothing", "cannot read"
    else:
        tree.routes(ipv4_default=("eth0", "podveth0"))  # eth0 of a pod, say
        proc, expected = tree.proc, "podveth0"
    with caplog.at_level(logging.WARNING, logger="simdra._driver.kinds.sysfs"):
        discover(tree, proc=proc)

    assert [r.getMessage() for r in caplog.records if expected in r.getMessage()]
    assert all("--proc-root" in r.getMessage() for r in caplog.records)


def test_a_moved_default_route_changes_the_stamp_and_the_devices(tree: SysfsTree) -> None:
    backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name="hw.example.com",
                           nvml=NoNvml(), proc_root=tree.proc)
    before = backend.change_stamp()
    tree.routes(ipv4_default=("eno1",))

    assert backend.change_stamp() != before
    assert "nic-eth0" in {d.name for _, d in backend.discover().devices()}


def test_the_plugin_settings_reach_the_backend(tree: SysfsTree) -> None:
    context = BackendContext(node_name=NODE, driver_name="hw.example.com",
                             sysfs_root=tree.sys, dev_root=tree.dev, proc_root=tree.proc,
                             sysfs_allow=("vendor:0x1a03",), sysfs_deny=("iface:eno1",))
    backend = SysfsBackend.from_context(context)

    assert backend.proc_root == tree.proc
    assert backend.rules == Rules(parse_selectors("vendor:0x1a03"), parse_selectors("iface:eno1"))


def test_a_fake_tree_reads_no_host_routes_unless_told(tree: SysfsTree) -> None:
    backend = SysfsBackend(tree.sys, tree.dev, node_name=NODE, driver_name="hw.example.com",
                           nvml=NoNvml())

    assert backend.proc_root is None
    assert "nic-eth0" in {d.name for _, d in backend.discover().devices()}


def test_unparsable_route_lines_are_skipped_not_fatal(tree: SysfsTree) -> None:
    net = tree.proc / "1" / "net"
    (net / "route").write_text("Iface\tDestination\nshort\nbad zz 0 0003 0 0 0 zz 0 0 0\n"
                                "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")
    (net / "ipv6_route").write_text("\x00\x01 garbage\n")

    found = discover(tree)

    assert "nic-eth0" not in found and "nic-eno1" in found
