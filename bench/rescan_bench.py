"""How long one sysfs rescan takes on a big node: a fake tree with 500 GPUs and 500 NICs.

Usage: python bench/rescan_bench.py [--gpus 500] [--nics 500] [--runs 15]

Prints the median wall time of `SysfsBackend.discover()` per rescan and per device,
against a floor measured in the same run: the least any scan must do, i.e. list
`bus/pci/devices` and `class/net` and read each PCI function's `class` file. Also the
cost of an idle rescan: `change_stamp()`, which the plugin compares before deciding
to discover (equal stamps: no discover). The tree
lives on the temp filesystem (tmpfs or page cache), as /sys is in memory too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from simdra._driver.kinds.sysfs import SysfsBackend
from simdra._driver.kinds.sysfs.nvml import NoNvml
from tests.devices.sysfs_trees import GIB, SysfsTree


def build_tree(base: Path, gpus: int, nics: int) -> SysfsTree:
    """A tree with `gpus` AMD GPUs (DRM nodes, VRAM) and `nics` 25G NICs."""
    tree = SysfsTree(base)
    for i in range(gpus):
        tree.gpu(_address(i), vendor=0x1002, device=0x740F, driver="amdgpu", card=i,
                 vram_bytes=64 * GIB, numa_node=i % 2)
    for i in range(nics):
        tree.nic(f"enp{i}s0", address=_address(0x1000 + i), speed=25000, numa_node=i % 2)
    return tree


def _address(n: int) -> str:
    """A distinct PCI address per n: one bus per device, 200 buses per domain."""
    return f"{n // 200:04x}:{n % 200 + 1:02x}:00.0"


def floor_scan(sys_root: Path) -> int:
    """The minimal walk: list PCI functions and interfaces, read every PCI class file."""
    found = 0
    for entry in (sys_root / "bus" / "pci" / "devices").iterdir():
        found += (entry / "class").read_text().startswith("0x03")
    found += sum(1 for _ in (sys_root / "class" / "net").iterdir())
    return found


def _median_ms(run: Callable[[], object], runs: int) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        timings.append(time.perf_counter() - start)
    return statistics.median(timings) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=500)
    parser.add_argument("--nics", type=int, default=500)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="simdra-rescan-") as base:
        tree = build_tree(Path(base), args.gpus, args.nics)
        backend = SysfsBackend(tree.sys, tree.dev, node_name="bench-node",
                               driver_name="bench.example.com", nvml=NoNvml())
        found = len(backend.discover().pools[0].devices)  # warm-up, and a sanity check
        expected = args.gpus + args.nics
        if found != expected:
            raise SystemExit(f"expected {expected} devices, discovered {found}")
        median_ms = _median_ms(backend.discover, args.runs)
        floor_ms = _median_ms(lambda: floor_scan(tree.sys), args.runs)
        stamp_ms = _median_ms(backend.change_stamp, args.runs)
    print(f"devices: {found} ({args.gpus} GPUs, {args.nics} NICs), runs: {args.runs}")
    print(f"rescan median: {median_ms:.1f} ms, {median_ms / max(found, 1) * 1000:.1f} us "
          "per device")
    print(f"floor (list + read PCI class files): {floor_ms:.1f} ms; "
          f"rescan / floor = {median_ms / floor_ms:.1f}x")
    print(f"idle rescan (change stamp, no discover): {stamp_ms:.1f} ms; "
          f"stamp / floor = {stamp_ms / floor_ms:.2f}x, discover / stamp = "
          f"{median_ms / stamp_ms:.0f}x")


if __name__ == "__main__":
    main()
