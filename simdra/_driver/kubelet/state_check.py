"""The plugin's files on disk, checked before the kubelet's sockets serve.

A plugin that registers and then finds it cannot read or write its own state exits a
moment later, and the kubelet has already started sending it calls. So `simdra run`
checks, before it creates any socket, every directory and file the plugin keeps (and
creates the directories that are missing, with their modes):

    <data dir>/                  0750  the DRA socket, the files below
    <data dir>/claims/           0700  one checkpoint record per prepared claim
    <data dir>/claims.generation 0600  changed by every writer before a record
    <data dir>/serialize.lock    0600  one prepare or unprepare at a time
    <data dir>/faults.json       0600  injected faults (fake devices only)
    <data dir>/faults.lock       0600  serializes changes to faults.json
    <data dir>/dra-device-metadata/  0755  device metadata (made when first needed)
    <CDI root>/                  0755  one CDI spec per prepared claim (may be a link)

A damaged state (a directory that is a file, a symlink where the plugin keeps a
directory or a file of its own, a directory of the plugin's owned by another user, a
file or CDI root it cannot read or write, a read-only file system) raises `StateError`
with one line: the path, what is wrong, what to do. Nothing is created before all is
checked, so a refused start leaves the node as it was; the plugin's own directories
get their modes back (as they always did), the rest is the operator's to fix. These
are cheap `lstat` and `access` calls: the module imports nothing heavy, and the names
are the owners' (a test keeps them in step with `simdra._driver.claims.store.checkpoint`,
`simdra._driver.plugin` and `simdra._driver.devices.faults`, too heavy to import this early).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from simdra._driver.atomicfile import make_directory, own_directory

# The data directory holds the DRA socket, the claim records and the locks: the kubelet
# (root) reaches the socket through it; nobody else needs in.
DATA_DIR_MODE = 0o750
RECORDS_DIR = "claims"  # simdra._driver.claims.checkpoint.records_directory
RECORDS_MODE = 0o700  # simdra._driver.claims.checkpoint.RECORDS_MODE
# simdra._driver.claims.device_metadata.HOST_SUBDIR: checked like the records directory whatever
# --device-metadata says (the start-up sweep walks it), made by the first prepare.
METADATA_DIR = "dra-device-metadata"
CDI_DIR_MODE = 0o755  # simdra._driver.claims.cdi.CDI_DIR_MODE: container runtimes read the specs
# Files the plugin reads and writes in the data directory, with what each is for.
STATE_FILES = {
    "claims.generation": "records' generation file",  # checkpoint.GENERATION_FILE
    "serialize.lock": "prepare lock file",  # plugin.SERIALIZE_LOCK_FILE
}
FAULT_FILES = {  # simdra._driver.devices.faults.control: FAULT_FILE and FaultFile.lock_path
    "faults.json": "fault file",
    "faults.lock": "fault lock file",
}
_RWX = os.R_OK | os.W_OK | os.X_OK
_ACCESS_WORDS = ((os.R_OK, "readable"), (os.W_OK, "writable"), (os.X_OK, "searchable"))


class StateError(RuntimeError):
    """The plugin's state on disk is damaged; the message is one line naming the path,
    what is wrong with it and what to do."""


def check_state(data_dir: Path, cdi_root: Path, *, fault_files: bool = False) -> None:
    """Check the data directory and the CDI root (see the module docstring), creating
    the directories that are missing; raise StateError at the first damaged one.

    fault_files: also check faults.json and faults.lock (the fake backend's).
    """
    own = ((data_dir, DATA_DIR_MODE, "data directory"),
           (data_dir / RECORDS_DIR, RECORDS_MODE, "claim records directory"))
    for path, _, role in own:
        _own_directory(path, role)
    _own_directory(data_dir / METADATA_DIR, "device metadata directory")
    files = {**STATE_FILES, **(FAULT_FILES if fault_files else {})}
    for name, role in files.items():
        _state_file(data_dir / name, role)
    cdi_missing = _cdi_root(cdi_root)
    for path, mode, role in own:  # the plugin's own: a mode it can fix, it fixes
        _make(own_directory, path, mode, role)
        _need_access(path, role, _RWX, "check that its file system is mounted read-write")
    if cdi_missing:
        _make(make_directory, cdi_root, CDI_DIR_MODE, "CDI root")


def _own_directory(path: Path, role: str) -> None:
    """A directory only the plugin uses, if there is one yet: a real directory (not a
    link), the plugin's own (so that it can give it its mode, later)."""
    info = _lstat(path, role)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise StateError(f"{_name(path, role)} is a symlink (to {_link(path)}), where the "
                         "plugin keeps a directory of its own: replace the link with the "
                         "directory itself, or move it aside")
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"{_name(path, role)} is {_kind(info.st_mode)}, not a directory: "
                         "move it aside (the plugin then creates an empty one)")
    if info.st_uid != os.geteuid():
        raise StateError(f"{_name(path, role)} is owned by uid {info.st_uid}, not by uid "
                         f"{os.geteuid()} that the plugin runs as: chown it to uid "
                         f"{os.geteuid()}, or move it aside")


def _state_file(path: Path, role: str) -> None:
    """A file the plugin reads and writes in place, if there is one yet: a regular file,
    not a link (the plugin would write through it), readable and writable."""
    info = _lstat(path, role)
    if info is None:
        return
    if stat.S_ISLNK(info.st_mode):
        raise StateError(f"{_name(path, role)} is a symlink (to {_link(path)}), where the "
                         "plugin keeps a regular file: move it aside")
    if not stat.S_ISREG(info.st_mode):
        raise StateError(f"{_name(path, role)} is {_kind(info.st_mode)}, not a regular "
                         "file: move it aside (the plugin then creates a new one)")
    _need_access(path, role, os.R_OK | os.W_OK, "restore its mode (0600)")


def _cdi_root(path: Path) -> bool:
    """The CDI root is shared with the container runtimes: a link to a directory is
    fine, and so is another owner, as long as the plugin can write its specs there.
    True when it is missing."""
    role = "CDI root"
    try:
        info = path.stat()
    except FileNotFoundError:
        if _lstat(path, role) is not None:
            raise StateError(f"{_name(path, role)} is a symlink to {_link(path)}, which does "
                             "not exist: create that directory, or fix --cdi-root") from None
        return True
    except OSError as err:
        raise StateError(f"{_name(path, role)}: cannot look it up: {_reason(err)}; fix "
                         "--cdi-root or the directories above it") from None
    if not stat.S_ISDIR(info.st_mode):
        raise StateError(f"{_name(path, role)} is {_kind(info.st_mode)}, not a directory: "
                         "move it aside, or fix --cdi-root")
    _need_access(path, role, _RWX, "give it back its mode (0755) or fix --cdi-root")
    return False


def _lstat(path: Path, role: str) -> os.stat_result | None:
    """The path's own status, None when it does not exist."""
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
    except OSError as err:  # e.g. a parent that is a file, or not searchable
        raise StateError(f"{_name(path, role)}: cannot look it up: {_reason(err)}; "
                         "check the directories above it") from None


def _make(make: Callable[[Path, int], Path], path: Path, mode: int, role: str) -> None:
    """`make(path, mode)` (a directory maker); its OSError becomes a StateError."""
    try:
        make(path, mode)
    except OSError as err:
        raise StateError(f"{_name(path, role)}: cannot create it or set its mode: "
                         f"{_reason(err)}; check the directories above it") from None


def _need_access(path: Path, role: str, mode: int, fix: str) -> None:
    """StateError unless the plugin's user may use `path` as `mode` (os.R_OK...) says;
    `access` also sees a read-only file system and dropped capabilities."""
    if not os.access(path, mode):
        wanted = ", ".join(word for bit, word in _ACCESS_WORDS if mode & bit)
        info = path.stat()
        raise StateError(f"{_name(path, role)} ({stat.filemode(info.st_mode)}, uid "
                         f"{info.st_uid}) is not {wanted} for uid {os.geteuid()} that the "
                         f"plugin runs as, or is on a read-only file system: {fix}")


def _name(path: Path, role: str) -> str:
    return f"{role} {path}"


def _link(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"),
             (stat.S_ISSOCK, "a socket"), (stat.S_ISFIFO, "a named pipe"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
             (stat.S_ISLNK, "a symlink"))
    return next((text for test, text in kinds if test(mode)), "not a regular file")


def _reason(err: OSError) -> str:
    return err.strerror or str(err)
