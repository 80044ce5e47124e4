"""The node's CPUs as CPU-kind devices (`simdra._driver.kinds.cpu`), read from sysfs: one device
per NUMA node holding that node's online CPUs.

`<sys>/devices/system/cpu/online` lists the online CPUs and
`<sys>/devices/system/node/node<N>/cpulist` each NUMA node's, in the kernel's list form
(`0-3,8-11`). A node whose CPUs are all offline (or a memory-only node) publishes nothing.
A kernel without NUMA support has no node directories: its online CPUs are one device
with no NUMA node attribute. Unreadable or malformed files read as empty, never raise.
"""

from __future__ import annotations

import re
from pathlib import Path

from simdra._driver.api import Device
from simdra._driver.kinds.cpu import cpu_device
from simdra.sysfs import read_text

_NODE_DIR = re.compile(r"^node(\d+)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_CPUS = 1 << 16  # more than any kernel's NR_CPUS: a bigger range is a broken file


def parse_cpu_list(text: str | None) -> set[int]:
    """The CPU numbers of a kernel list (`0-3,8,10-11`); an empty set when malformed."""
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        if not part:
            continue
        match = _RANGE.match(part.strip())
        if match is None:
            return set()
        first, last = int(match[1]), int(match[2] or match[1])
        if last < first or last >= MAX_CPUS:
            return set()
        cpus.update(range(first, last + 1))
    return cpus


def format_cpu_list(cpus: set[int]) -> str:
    """The kernel's list form of `cpus`: `{0, 1, 2, 3, 8}` -> `0-3,8`."""
    parts: list[str] = []
    ordered = sorted(cpus)
    start = prev = None
    for cpu in [*ordered, None]:
        if cpu is not None and prev is not None and cpu == prev + 1:
            prev = cpu
            continue
        if start is not None and prev is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = cpu
    return ",".join(parts)


def numa_cpus(sysfs_root: Path) -> dict[int | None, set[int]]:
    """NUMA node -> its online CPUs (None: a kernel without NUMA nodes)."""
    online = parse_cpu_list(read_text(sysfs_root / "devices/system/cpu/online"))
    node_dir = sysfs_root / "devices/system/node"
    nodes: dict[int | None, set[int]] = {}
    try:
        entries = sorted(node_dir.iterdir())
    except OSError:
        entries = []
    for entry in entries:
        match = _NODE_DIR.match(entry.name)
        if match:
            cpus = parse_cpu_list(read_text(entry / "cpulist")) & online
            if cpus:
                nodes[int(match[1])] = cpus
    if not nodes and not entries and online:
        nodes[None] = online
    return nodes


def cpu_devices(sysfs_root: Path, driver_name: str, node_name: str) -> list[Device]:
    """One CPU device per NUMA node with online CPUs, in node order."""
    return [cpu_device(driver_name, node_name, numa_node, len(cpus), format_cpu_list(cpus))
            for numa_node, cpus in sorted(numa_cpus(sysfs_root).items(),
                                          key=lambda item: item[0] or 0)]
