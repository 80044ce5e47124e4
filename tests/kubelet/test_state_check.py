"""The plugin's files, checked before the kubelet's sockets serve: missing directories
are created with their modes; a damaged state is refused with one line naming the path,
what is wrong and what to do."""

from __future__ import annotations

import ctypes
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from simdra._driver.kubelet import state_check
from simdra._driver.kubelet.state_check import StateError, check_state

ROOT = Path(__file__).resolve().parents[2]
NOBODY = 65534  # a uid that is not the test's


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


def _paths(root: Path) -> tuple[Path, Path]:
    return root / "plugins" / "drv", root / "cdi"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _refusal(root: Path, *, fault_files: bool = True) -> str:
    data, cdi = _paths(root)
    with pytest.raises(StateError) as raised:
        check_state(data, cdi, fault_files=fault_files)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_a_fresh_node_gets_its_directories_with_their_modes(root: Path) -> None:
    data, cdi = _paths(root)

    check_state(data, cdi, fault_files=True)

    assert (_mode(data), _mode(data / "claims"), _mode(cdi)) == (0o750, 0o700, 0o755)


def test_the_plugins_own_directories_get_their_modes_back(root: Path) -> None:
    data, cdi = _paths(root)
    (data / "claims").mkdir(parents=True)
    data.chmod(0o777)
    (data / "claims").chmod(0o500)  # not even writable: the owner may still chmod it

    check_state(data, cdi)

    assert (_mode(data), _mode(data / "claims")) == (0o750, 0o700)


def _file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")


def _directory(path: Path) -> None:
    path.mkdir(parents=True)


def _link_to_directory(path: Path) -> None:
    target = path.parent.parent / "elsewhere"
    target.mkdir(parents=True, exist_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(target)


# (what is made where, the path that is damaged, what the line must say)
DAMAGE: list[tuple[Callable[[Path], None], str, str]] = [
    (_file, "plugins/drv/claims", "is a regular file, not a directory: move it aside"),
    (_link_to_directory, "plugins/drv/claims", "is a symlink (to "),
    (_file, "plugins/drv", "is a regular file, not a directory: move it aside"),
    (_link_to_directory, "plugins/drv", "replace the link with the directory itself"),
    (_directory, "plugins/drv/claims.generation", "is a directory, not a regular file"),
    (_link_to_directory, "plugins/drv/serialize.lock", "is a symlink (to "),
    (_directory, "plugins/drv/faults.json", "is a directory, not a regular file"),
    (_directory, "plugins/drv/faults.lock", "is a directory, not a regular file"),
    (_file, "cdi", "is a regular file, not a directory: move it aside, or fix --cdi-root"),
    (_file, "plugins", "cannot look it up: Not a directory"),
]


@pytest.mark.parametrize(("make", "damaged", "says"), DAMAGE,
                         ids=[f"{d}-{m.__name__}" for m, d, _ in DAMAGE])
def test_a_damaged_state_is_refused_in_one_line_naming_the_path(
    root: Path, make: Callable[[Path], None], damaged: str, says: str
) -> None:
    make(root / damaged)

    message = _refusal(root)

    assert str(root / damaged) in message and says in message


def test_fault_files_are_checked_only_where_faults_are_injected(root: Path) -> None:
    data, cdi = _paths(root)
    (data / "faults.json").mkdir(parents=True)

    check_state(data, cdi, fault_files=False)  # the sysfs backend never reads it

    assert "faults.json" in _refusal(root, fault_files=True)


def test_a_cdi_root_that_links_to_a_directory_is_fine(root: Path) -> None:
    data, cdi = _paths(root)
    (root / "real-cdi").mkdir()
    cdi.symlink_to(root / "real-cdi")

    check_state(data, cdi)


def test_a_cdi_root_that_links_nowhere_is_refused(root: Path) -> None:
    _, cdi = _paths(root)
    cdi.symlink_to(root / "gone")

    message = _refusal(root)

    assert f"CDI root {cdi} is a symlink to {root / 'gone'}, which does not exist" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to another uid")
def test_a_directory_of_another_user_is_refused(root: Path) -> None:
    data, _ = _paths(root)
    (data / "claims").mkdir(parents=True)
    os.chown(data / "claims", NOBODY, NOBODY)

    message = _refusal(root)

    assert f"{data / 'claims'} is owned by uid {NOBODY}, not by uid 0" in message
    assert "chown it" in message


# The check in a child process, as the plugin runs in its pod: as root (or the test's
# user) without the capabilities that let root write anywhere (deploy/: drop ALL).
_CHECK = """
import sys
from pathlib import Path
from simdra._driver.kubelet.state_check import StateError, check_state
try:
    check_state(Path(sys.argv[1]), Path(sys.argv[2]))
except StateError as err:
    print(err)
"""
_PR_CAPBSET_DROP = 24
_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH, _CAP_FOWNER = 1, 2, 3


def _drop_root_powers() -> None:
    """In the child before exec: out of the bounding set, so the program exec'd gets none
    of them (root's other capabilities do not bypass modes)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (_CAP_DAC_OVERRIDE, _CAP_DAC_READ_SEARCH, _CAP_FOWNER):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _read_only_lock(root: Path) -> Path:
    lock = _paths(root)[0] / "serialize.lock"
    _file(lock)
    lock.chmod(0o400)
    return lock


def _read_only_cdi_root(root: Path) -> Path:
    cdi = _paths(root)[1]
    cdi.mkdir()
    cdi.chmod(0o555)
    return cdi


@pytest.mark.parametrize(("make", "says"), [
    (_read_only_lock, "(-r--------, uid {uid}) is not readable, writable for uid {uid} "
                      "that the plugin runs as, or is on a read-only file system: "
                      "restore its mode (0600)"),
    (_read_only_cdi_root, "(dr-xr-xr-x, uid {uid}) is not readable, writable, searchable "
                          "for uid {uid}"),
])
def test_a_file_or_cdi_root_the_plugin_cannot_write_is_refused(
    root: Path, make: Callable[[Path], Path], says: str
) -> None:
    damaged = make(root)
    data, cdi = _paths(root)

    done = subprocess.run([sys.executable, "-c", _CHECK, str(data), str(cdi)],
                          capture_output=True, text=True, timeout=60, check=True, cwd=ROOT,
                          preexec_fn=_drop_root_powers)

    message = done.stdout.strip()
    assert str(damaged) in message
    assert says.format(uid=os.geteuid()) in message


def test_the_names_are_the_owners_names(root: Path) -> None:
    from simdra._driver import plugin
    from simdra._driver.claims.plan import cdi
    from simdra._driver.claims.store import checkpoint
    from simdra._driver.devices.faults.control import FaultFile, fault_file_path

    data = root / "d"
    assert checkpoint.records_directory(data) == data / state_check.RECORDS_DIR
    assert checkpoint.RECORDS_MODE == state_check.RECORDS_MODE
    assert cdi.CDI_DIR_MODE == state_check.CDI_DIR_MODE
    assert {checkpoint.GENERATION_FILE, plugin.SERIALIZE_LOCK_FILE} == set(
        state_check.STATE_FILES)
    faults = FaultFile(fault_file_path(data))
    assert {faults.path, faults.lock_path} == {data / n for n in state_check.FAULT_FILES}
