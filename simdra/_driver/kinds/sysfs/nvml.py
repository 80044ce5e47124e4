"""NVIDIA facts from NVML, behind a tiny protocol so tests can inject a fake.

`PynvmlSource` uses `pynvml` (package `nvidia-ml-py`), an optional dependency: when it is
not installed or NVML cannot initialise (no NVIDIA driver), GPUs are still published from
sysfs alone. That is logged once at debug level and is not an error.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

_BUS_ID = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})"
    r"\.(?P<fn>[0-7])$"
)


@dataclass(frozen=True)
class NvmlGpu:
    """What NVML says about one GPU."""

    bus_id: str  # normalized like sysfs: "0000:3b:00.0"
    uuid: str
    name: str
    memory_total: int  # bytes
    compute_capability: tuple[int, int] | None = None
    minor: int | None = None  # N of /dev/nvidiaN


@dataclass(frozen=True)
class NvmlSnapshot:
    """One consistent read of NVML: system versions and every GPU."""

    driver_version: str
    cuda_driver_version: int | None  # NVML's encoding: 12040 means CUDA 12.4
    gpus: tuple[NvmlGpu, ...]

    def by_bus_id(self) -> dict[str, NvmlGpu]:
        """GPUs keyed by normalized PCI bus id, to match them with sysfs functions."""
        return {gpu.bus_id: gpu for gpu in self.gpus}


class NvmlSource(Protocol):
    """Reads NVML; None means NVML is not available on this node."""

    def snapshot(self) -> NvmlSnapshot | None:
        """The current NVML facts, or None when NVML is absent or cannot start."""
        ...


class NoNvml:
    """An NvmlSource for nodes (and tests) without NVIDIA tooling."""

    def snapshot(self) -> NvmlSnapshot | None:
        """Always None."""
        return None


def normalize_bus_id(bus_id: str) -> str | None:
    """NVML's `00000000:3B:00.0` as sysfs writes it (`0000:3b:00.0`), or None if malformed."""
    match = _BUS_ID.match(bus_id.strip())
    if not match:
        return None
    domain = int(match["domain"] or "0", 16)
    return f"{domain:04x}:{match['bus'].lower()}:{match['dev'].lower()}.{match['fn']}"


def cuda_version_text(encoded: int) -> str:
    """NVML's CUDA driver version integer (12040) as `12.4.0`."""
    return f"{encoded // 1000}.{encoded % 1000 // 10}.0"


class PynvmlSource:
    """The real NVML through `pynvml`; initialised and shut down on every snapshot, so a
    driver loaded after the plugin started is picked up at the next rescan."""

    def __init__(self) -> None:
        self._told_absent = False

    def snapshot(self) -> NvmlSnapshot | None:
        """Read every GPU NVML sees, or None when NVML is unavailable."""
        try:
            import pynvml  # optional dependency: nvidia-ml-py
        except ImportError as err:
            self._absent(f"pynvml is not installed ({err})")
            return None
        try:
            pynvml.nvmlInit()
        except Exception as err:  # NVMLError subclasses, OSError from the loader
            self._absent(f"NVML did not initialise: {err}")
            return None
        try:
            return _read_snapshot(pynvml)
        except Exception as err:
            log.warning("NVML: reading system facts failed; GPUs published from sysfs "
                        "only: %s", err)
            return None
        finally:
            _shutdown(pynvml)

    def _absent(self, why: str) -> None:
        if not self._told_absent:
            log.debug("NVML unavailable, NVIDIA GPUs get sysfs attributes only: %s", why)
            self._told_absent = True


def _read_snapshot(nvml: Any) -> NvmlSnapshot:
    gpus = []
    for index in range(nvml.nvmlDeviceGetCount()):
        gpu = _read_gpu(nvml, index)
        if gpu is not None:
            gpus.append(gpu)
    return NvmlSnapshot(
        driver_version=_text(nvml.nvmlSystemGetDriverVersion()),
        cuda_driver_version=_optional(nvml.nvmlSystemGetCudaDriverVersion),
        gpus=tuple(gpus),
    )


def _read_gpu(nvml: Any, index: int) -> NvmlGpu | None:
    """One GPU, or None (logged) when NVML cannot describe it, e.g. it fell off the bus."""
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        raw_bus_id = _text(nvml.nvmlDeviceGetPciInfo(handle).busId)
        bus_id = normalize_bus_id(raw_bus_id)
        if bus_id is None:
            log.warning("NVML GPU %d: unexpected PCI bus id %r; skipped", index, raw_bus_id)
            return None
        capability = _optional(nvml.nvmlDeviceGetCudaComputeCapability, handle)
        return NvmlGpu(
            bus_id=bus_id,
            uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
            name=_text(nvml.nvmlDeviceGetName(handle)),
            memory_total=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
            compute_capability=tuple(capability) if capability else None,
            minor=_optional(nvml.nvmlDeviceGetMinorNumber, handle),
        )
    except Exception as err:
        log.warning("NVML GPU %d: cannot read its facts; it keeps sysfs attributes only: %s",
                    index, err)
        return None


def _optional(call: Any, *args: Any) -> Any:
    """A fact some GPUs or driver versions do not support: None instead of an error."""
    try:
        return call(*args)
    except Exception:
        return None


def _text(value: str | bytes) -> str:
    # Older pynvml releases return bytes, newer ones str.
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception as err:
        log.debug("NVML shutdown failed: %s", err)
