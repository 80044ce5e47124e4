"""The pynvml adapter: absent NVML is quiet, present NVML is read and normalized."""

from __future__ import annotations

import logging
import sys
import types
from dataclasses import dataclass

import pytest

from simdra._driver.kinds.sysfs.nvml import (
    NvmlGpu,
    PynvmlSource,
    cuda_version_text,
    normalize_bus_id,
)


class NVMLError(Exception):
    pass


@dataclass
class _Memory:
    total: int


@dataclass
class _Pci:
    busId: bytes  # pynvml's field name


def fake_pynvml(*, init_fails: bool = False) -> types.ModuleType:
    """A stand-in for the pynvml module with two GPUs; the second cannot report its UUID."""
    module = types.ModuleType("pynvml")
    state = {"shutdown": 0}
    bus_ids = [b"00000000:3B:00.0", b"00000000:86:00.0"]

    def init() -> None:
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def uuid(handle: int) -> str:
        if handle == 1:
            raise NVMLError("GPU is lost")
        return "GPU-aaaa"

    module.NVMLError = NVMLError  # type: ignore[attr-defined]
    module.nvmlInit = init  # type: ignore[attr-defined]
    module.nvmlShutdown = lambda: state.__setitem__("shutdown", state["shutdown"] + 1)  # type: ignore[attr-defined]
    module.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    module.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    module.nvmlDeviceGetPciInfo = lambda h: _Pci(bus_ids[h])  # type: ignore[attr-defined]
    module.nvmlDeviceGetUUID = uuid  # type: ignore[attr-defined]
    module.nvmlDeviceGetName = lambda h: b"NVIDIA H100"  # type: ignore[attr-defined]
    module.nvmlDeviceGetMemoryInfo = lambda h: _Memory(80 * 2**30)  # type: ignore[attr-defined]
    module.nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)  # type: ignore[attr-defined]
    module.nvmlDeviceGetMinorNumber = lambda h: h  # type: ignore[attr-defined]
    module.nvmlSystemGetDriverVersion = lambda: "550.54.15"  # type: ignore[attr-defined]

    def no_cuda() -> int:
        raise NVMLError("Not Supported")

    module.nvmlSystemGetCudaDriverVersion = no_cuda  # type: ignore[attr-defined]
    module.state = state  # type: ignore[attr-defined]
    return module


def test_missing_pynvml_is_not_an_error_and_is_logged_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    source = PynvmlSource()

    with caplog.at_level(logging.DEBUG, logger="simdra._driver.kinds.sysfs.nvml"):
        assert source.snapshot() is None
        assert source.snapshot() is None

    notes = [r for r in caplog.records if "NVML unavailable" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.DEBUG


def test_nvml_that_cannot_initialise_is_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(init_fails=True))

    assert PynvmlSource().snapshot() is None


def test_present_nvml_is_read_and_shut_down(monkeypatch: pytest.MonkeyPatch) -> None:
    module = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", module)

    snapshot = PynvmlSource().snapshot()

    assert snapshot is not None
    assert snapshot.driver_version == "550.54.15"
    assert snapshot.cuda_driver_version is None  # unsupported: left out, not fatal
    # The GPU whose UUID cannot be read is skipped; it keeps its sysfs attributes.
    assert snapshot.gpus == (NvmlGpu(bus_id="0000:3b:00.0", uuid="GPU-aaaa",
                                     name="NVIDIA H100", memory_total=80 * 2**30,
                                     compute_capability=(9, 0), minor=0),)
    assert module.state["shutdown"] == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("nvml", "sysfs"), [
    ("00000000:3B:00.0", "0000:3b:00.0"),
    ("0000:3b:00.0", "0000:3b:00.0"),
    ("00000001:C1:1F.7", "0001:c1:1f.7"),
    ("3b:00.0", "0000:3b:00.0"),
    ("garbage", None),
])
def test_bus_ids_are_normalized_like_sysfs(nvml: str, sysfs: str | None) -> None:
    assert normalize_bus_id(nvml) == sysfs


def test_cuda_driver_version_encoding() -> None:
    assert cuda_version_text(12040) == "12.4.0"
    assert cuda_version_text(11080) == "11.8.0"
