"""The fault files are never followed through a link: a symlinked faults.json is a
corrupt fault file (the faults in force stay, nothing behind it is read), and a symlinked
faults.lock is refused rather than created or opened where it points. Real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from simdra._driver.cli.fault import fault_main
from simdra._driver.devices.faults import FaultError, FaultFile
from simdra._driver.devices.faults.control import fault_file_path, hold_lock


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins" / "dra.example.com"
    directory.mkdir(parents=True)
    return directory


def test_a_linked_fault_file_is_not_read_and_the_faults_in_force_stay(data_dir, tmp_path):
    faults = FaultFile(fault_file_path(data_dir))
    assert fault_main(["--plugin-dir", str(data_dir), "gpu-1", "unhealthy"]) == 0
    in_force = faults.current()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(faults.path.read_bytes())
    faults.path.unlink()
    faults.path.symlink_to(elsewhere)

    with pytest.raises(FaultError, match="symlink"):
        faults.load()
    assert faults.current() == in_force
    assert faults.error is not None and "symlink" in faults.error


def test_a_linked_fault_lock_is_refused_and_its_target_never_made(data_dir, tmp_path):
    lock = FaultFile(fault_file_path(data_dir)).lock_path
    target = tmp_path / "made-by-the-plugin"
    lock.symlink_to(target)

    with pytest.raises(OSError), hold_lock(lock, timeout=1.0):
        pass
    assert not os.path.lexists(target)
