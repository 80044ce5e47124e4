"""A simulated GPU server for the real-node sysfs scenarios: its sysfs tree, its /dev and
its route tables, in the kernel's layout (tests/devices/sysfs_trees.py), and what the
sysfs backend must publish from them, written out here rather than computed.

The tree is built on the host and mounted into the plugin's pod at the same path: the
CDI specs name a GPU's device nodes by their host path, which containerd opens. Those
nodes are real character devices made for the test, numbered in the range Linux keeps
for local use (major 240, Documentation/admin-guide/devices.txt), so no driver stands
behind them; containers only stat them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.devices.sysfs_trees import GIB, SysfsTree

from ..realnode import PluginDeployment
from .mounting_backend import CONTAINER_PATH

PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
NUMA_NODE = "resource.kubernetes.io/numaNode"  # the standard name, next to simdra's own
LOCAL_MAJOR = 240  # "LOCAL/EXPERIMENTAL USE" for character devices
BACKEND_MODULE = Path(__file__).with_name("mounting_backend.py")
MOUNT_PATH = CONTAINER_PATH  # where mounting_backend puts the share in containers

# Attributes of each device to publish (their value, whatever the member: string, int, bool).
PUBLISHED: dict[str, dict[str, Any]] = {
    "gpu-0000-3b-00-0": {
        "type": "gpu", "vendor": "NVIDIA", "vendorID": "0x10de", "deviceID": "0x2330",
        "kernelDriver": "nvidia", "numaNode": 0, NUMA_NODE: 0, PCI_BUS_ID: "0000:3b:00.0",
        PCIE_ROOT: "pci0000:3a",
    },
    "gpu-0000-c1-00-0": {
        "type": "gpu", "vendor": "AMD", "vendorID": "0x1002", "deviceID": "0x740f",
        "kernelDriver": "amdgpu", "numaNode": 1, NUMA_NODE: 1, PCI_BUS_ID: "0000:c1:00.0",
        PCIE_ROOT: "pci0000:c1",
    },
    "nic-enp94s0f1": {
        "type": "nic", "vendor": "Mellanox", "vendorID": "0x15b3", "deviceID": "0x1017",
        "kernelDriver": "mlx5_core", "numaNode": 0, NUMA_NODE: 0, PCI_BUS_ID: "0000:5e:00.1",
        PCIE_ROOT: "pci0000:5e", "interfaceName": "enp94s0f1", "virtual": False,
        "macAddress": "0c:42:a1:5e:00:01", "mtu": 9000,
    },
}
# Capacity values (amdgpu's VRAM size; the link speed in bits per second).
CAPACITY = {"gpu-0000-3b-00-0": {}, "gpu-0000-c1-00-0": {"memory": "64Gi"},
            "nic-enp94s0f1": {"bandwidth": "25G"}}
# What the start-up log must name as left out, and why.
LEFT_OUT = (
    "gpu 0000:02:00.0: console display: ASPEED BMC video (AST2x00) (vendor 0x1a03)",
    "nic eno1: carries the node's default route (IPv4)",
)
NODE_GPU = "0000:c1:00.0"  # the GPU with DRM nodes


@dataclass(frozen=True)
class DeviceNode:
    """A character device of the tree's /dev, as a container must see it."""

    path: str  # in the container: /dev/<relative>
    major: int
    minor: int
    mode: int  # permission bits

    def stat_line(self) -> str:
        """What busybox `stat -c '%F|%t:%T|%a'` prints for it (numbers in hex)."""
        return f"character special file|{self.major:x}:{self.minor:x}|{self.mode:o}"


# The AMD GPU's DRM nodes (card1, renderD129), with modes no runtime default gives.
NODES = (DeviceNode("/dev/dri/card1", LOCAL_MAJOR, 1, 0o620),
         DeviceNode("/dev/dri/renderD129", LOCAL_MAJOR, 129, 0o604))


@dataclass(frozen=True)
class SimulatedNode:
    """The tree at `base` (sys, dev, proc), a directory to share with containers, and the
    patch of the plugin's pod that makes the sysfs overlay read them."""

    base: Path

    @property
    def share(self) -> Path:
        return self.base / "share"

    def pod_patch(self, *, mounting_backend: bool = False) -> dict[str, Any]:
        """SYSFS_ROOT, DEV_ROOT and PROC_ROOT pointed at the tree, mounted read-only at its
        host path; with `mounting_backend`, the backend of mounting_backend.py instead of
        plain sysfs (imported from the tree's python/ directory)."""
        env = {"SYSFS_ROOT": f"{self.base}/sys", "DEV_ROOT": f"{self.base}/dev",
               "PROC_ROOT": f"{self.base}/proc"}
        if mounting_backend:
            env |= {"DEVICE_BACKEND": "simdra_e2e_backend:MountingSysfsBackend",
                    "PYTHONPATH": f"{self.base}/python", "SIMDRA_E2E_SHARE": str(self.share)}
        return {
            "containers": [{
                "name": "plugin",
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "volumeMounts": [{"name": "e2e-hardware", "mountPath": str(self.base),
                                  "readOnly": True}],
            }],
            "volumes": [{"name": "e2e-hardware",
                         "hostPath": {"path": str(self.base), "type": "Directory"}}],
        }


def build(base: Path, greeting: str) -> SimulatedNode:
    """The tree under `base` (a new directory): two GPUs to publish (an NVIDIA one behind a
    bridge, an AMD one with DRM nodes and VRAM), the BMC's console display, a fast NIC
    and the uplink NIC that carries the default route, loopback and a veth, a SATA
    controller; `greeting` is written to share/greeting for mounting_backend."""
    tree = SysfsTree(base)
    tree.gpu("0000:3b:00.0", numa_node=0, bridge="0000:3a:00.0")
    tree.gpu(NODE_GPU, vendor=0x1002, device=0x740F, driver="amdgpu", card=1,
             vram_bytes=64 * GIB, numa_node=1)
    tree.gpu("0000:02:00.0", vendor=0x1A03, device=0x2000, driver="ast", class_code=0x030000)
    tree.pci_function("0000:00:1f.2", class_code=0x010601, vendor=0x8086, device=0xA352,
                      driver="ahci")
    tree.nic("enp94s0f1", address="0000:5e:00.1", speed=25000, numa_node=0, mtu=9000,
             mac="0c:42:a1:5e:00:01")
    tree.nic("eno1", address="0000:00:19.0", speed=1000, vendor=0x8086, device=0x15B8,
             driver="e1000e")
    tree.nic("lo", mac="00:00:00:00:00:00", mtu=65536)
    tree.nic("veth1a2b3c")
    tree.routes(ipv4_default=("eno1",))
    for node in NODES:  # sysfs_trees made them plain files
        host = tree.dev / node.path.removeprefix("/dev/")
        host.unlink()
        os.mknod(host, stat.S_IFCHR | node.mode, os.makedev(node.major, node.minor))
        host.chmod(node.mode)  # mknod's mode goes through the umask
    (base / "share").mkdir()
    (base / "share" / "greeting").write_text(greeting + "\n")
    (base / "python").mkdir()
    shutil.copy(BACKEND_MODULE, base / "python" / "simdra_e2e_backend.py")
    return SimulatedNode(base)


@contextlib.contextmanager
def deployed(plugin: PluginDeployment, greeting: str, *,
             mounting_backend: bool = False) -> Iterator[SimulatedNode]:
    """The tree built in the node's run directory and the DaemonSet on the sysfs overlay
    reading it (a rolling update), until the block ends: then the fake overlay again and
    the tree removed."""
    base = Path(tempfile.mkdtemp(prefix="sysfs-", dir=plugin.node.run_dir))
    try:
        hardware = build(base / "hw", greeting)
        with plugin.using("sysfs", pod_patch=hardware.pod_patch(
                mounting_backend=mounting_backend)):
            yield hardware
    finally:
        plugin.restore()  # not lazily: the plugin reads the tree removed next
        shutil.rmtree(base, ignore_errors=True)
