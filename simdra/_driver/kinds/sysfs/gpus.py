"""GPUs: PCI functions of the display class, with memory and the device nodes a
container needs.

Memory is published as a `memory` capacity only when the size of the device's own memory
is known: from NVML for NVIDIA, from `mem_info_vram_total` for amdgpu. PCI BAR sizes are
deliberately not used as a fallback: a BAR is an address window (256 MiB on most GPUs
without resizable BAR, system RAM for integrated GPUs), not the memory a workload gets,
and a wrong capacity is worse than none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simdra._driver.api import JSON, format_quantity
from simdra._driver.kinds.sysfs.draft import DeviceDraft, pci_attributes
from simdra._driver.kinds.sysfs.nvml import NvmlGpu, NvmlSnapshot, cuda_version_text
from simdra.sysfs import PciFunction, label, read_int, string_attr, to_semver, version_attr

# Driver-wide NVIDIA nodes every CUDA container needs besides its GPU's /dev/nvidiaN.
NVIDIA_CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")

_DRM_NODE = re.compile(r"^(card|renderD)(\d+)$")


@dataclass(frozen=True)
class GpuFacts:
    """What sysfs tells about a GPU beyond its PCI identity."""

    drm_nodes: tuple[str, ...]  # e.g. ("card0", "renderD128")
    vram_bytes: int | None


def read_gpu_facts(function: PciFunction) -> GpuFacts:
    """DRM nodes listed under the function's `drm/` and amdgpu's VRAM size."""
    try:
        entries = [p.name for p in (function.path / "drm").iterdir()]
    except OSError:
        entries = []
    nodes = sorted((m[1], int(m[2])) for m in map(_DRM_NODE.match, entries) if m)
    vram = read_int(function.path / "mem_info_vram_total")
    return GpuFacts(
        drm_nodes=tuple(f"{kind}{number}" for kind, number in nodes),
        vram_bytes=vram if vram and vram > 0 else None,
    )


def present_control_nodes(dev_root: Path) -> tuple[str, ...]:
    """The NVIDIA control nodes that exist under `dev_root` (nvidia-uvm only exists once
    its module is loaded, so presence is checked rather than assumed)."""
    return tuple(n for n in NVIDIA_CONTROL_NODES if (dev_root / n).exists())


def gpu_drafts(functions: Iterable[PciFunction], nvml: NvmlSnapshot | None, dev_root: Path,
               control_nodes: Sequence[str] = ()) -> list[DeviceDraft]:
    """A draft for every display-class function, NVML facts matched by PCI bus id."""
    by_bus: Mapping[str, NvmlGpu] = nvml.by_bus_id() if nvml else {}
    return [
        gpu_draft(f, read_gpu_facts(f), by_bus.get(f.address), nvml, dev_root, control_nodes)
        for f in functions
        if f.is_display
    ]


def gpu_draft(function: PciFunction, facts: GpuFacts, nvml_gpu: NvmlGpu | None,
              nvml: NvmlSnapshot | None, dev_root: Path,
              control_nodes: Sequence[str] = ()) -> DeviceDraft:
    """One GPU's published form and container edits (pure)."""
    attrs: dict[str, Any] = {"type": string_attr("gpu"), **pci_attributes(function)}
    capacity: JSON = {}
    if facts.vram_bytes:
        capacity["memory"] = {"value": format_quantity(facts.vram_bytes)}
    nodes = [f"dri/{n}" for n in facts.drm_nodes]
    if nvml_gpu is not None and nvml is not None:
        attrs.update(_nvml_attributes(nvml_gpu, nvml))
        if nvml_gpu.memory_total > 0:
            capacity["memory"] = {"value": format_quantity(nvml_gpu.memory_total)}
        if nvml_gpu.minor is not None:
            nodes.append(f"nvidia{nvml_gpu.minor}")
        nodes.extend(control_nodes)
    spec: JSON = {"attributes": attrs}
    if capacity:
        spec["capacity"] = capacity
    edits: JSON = {"deviceNodes": [device_node(n, dev_root) for n in nodes]} if nodes else {}
    return DeviceDraft(name=label("gpu", function.address), identity=function.address, spec=spec,
                       container_edits=edits)


def device_node(relative: str, dev_root: Path) -> JSON:
    """A CDI deviceNode: `/dev/<relative>` in the container, taken from `dev_root` on the
    host. `hostPath` is only written when it differs, since it needs CDI 0.5.0."""
    node: JSON = {"path": f"/dev/{relative}"}
    host = str(dev_root / relative)
    if host != node["path"]:
        node["hostPath"] = host
    return node


def _nvml_attributes(gpu: NvmlGpu, nvml: NvmlSnapshot) -> dict[str, Any]:
    attrs: dict[str, Any] = {"uuid": string_attr(gpu.uuid), "model": string_attr(gpu.name)}
    driver = to_semver(nvml.driver_version)
    if driver:
        attrs["driverVersion"] = version_attr(driver)
    if nvml.cuda_driver_version:
        attrs["cudaDriverVersion"] = version_attr(cuda_version_text(nvml.cuda_driver_version))
    if gpu.compute_capability:
        major, minor = gpu.compute_capability
        attrs["cudaComputeCapability"] = version_attr(f"{major}.{minor}.0")
    return attrs
