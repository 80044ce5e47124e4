"""Durable file operations and safe file names.

Every file the driver owns (CDI specs, checkpoint records) is written so that a crash at
any instant leaves either the old content or the new content, never a torn file: write a
temp file in the same directory, fsync it, rename it over the target, fsync the directory.
File names built from API data (claim UIDs) go through `safe_child` first, so a hostile
value can never name a path outside the directory it is meant for.

An own directory's mode is never changed through a link (`own_directory`); the other
no-follow helpers are in `simdra._driver.core.nofollow`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import re
import stat
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from simdra._driver.core.nofollow import open_directory

# Temp files start with a dot and end in ".tmp": CDI runtimes only load *.json/*.yaml,
# and the directory scans of this project skip dot-files, so a temp file left by a crash
# is never mistaken for a real one.
TEMP_SUFFIX = ".tmp"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MAX_NAME = 255  # NAME_MAX of common Linux file systems
# `.<target name>.<random>.tmp`, as `write_atomic` and `StagedWrite` make it.
_TEMP_NAME = re.compile(r"^\.(?P<target>[A-Za-z0-9][A-Za-z0-9._-]*)\.[A-Za-z0-9_]+\.tmp$")
# A write takes milliseconds; a temp file this old belongs to no write still running, in
# this process or another instance's.
STALE_TEMP_SECONDS = 60.0
_TEMP_ATTEMPTS = 100  # names tried before giving up (48 random bits each)


def temp_prefix(target_name: str) -> str:
    """The prefix of temp files `write_atomic` creates for `target_name`."""
    return f".{target_name}."


def temp_target(name: str) -> str | None:
    """The target file name of a temp file `write_atomic` made, or None if `name` is not
    one (the pattern is specific: dot, a safe target name, random characters, `.tmp`)."""
    match = _TEMP_NAME.match(name)
    return match["target"] if match else None


def remove_stale_temps(
    directory: str | os.PathLike[str], older_than: float = STALE_TEMP_SECONDS
) -> list[Path]:
    """Remove the temp files of interrupted `write_atomic` calls in `directory` that are
    older than `older_than` seconds (0: all of them, for callers that hold the lock every
    writer there takes); returns what was removed."""
    removed = []
    now = time.time()
    for path in sorted(Path(directory).iterdir()):
        if temp_target(path.name) is None:
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < older_than:
            continue
        if remove_durable(path):
            removed.append(path)
    return removed


def make_directory(path: str | os.PathLike[str], mode: int) -> Path:
    """Create `path` and any missing parents with exactly `mode` (whatever the umask);
    directories that exist already keep their mode (they may not be ours)."""
    target = Path(path)
    missing = []
    for candidate in (target, *target.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.mkdir(directory, mode)
            os.chmod(directory, mode)  # mkdir applies the umask; chmod does not
    return target


def own_directory(path: str | os.PathLike[str], mode: int) -> Path:
    """A directory only this driver uses: created like `make_directory`, and its mode set
    to `mode` even when it exists (e.g. made by an older version under another umask).
    NotADirectoryError (one line) when `path` is a symlink or no directory: its mode is
    never changed through a link."""
    target = make_directory(path, mode)
    fd = open_directory(target)
    try:
        if os.fstat(fd).st_mode & 0o7777 != mode:
            os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return target


def write_atomic(
    path: str | os.PathLike[str], data: bytes, mode: int = 0o600, *, sync_dir: bool = True
) -> None:
    """Replace `path` with `data` atomically and durably, with exactly `mode` (the
    default keeps it to this driver's user; whatever the umask).

    A reader sees either the previous file or the complete new one; once this returns,
    the new content survives a power loss. With `sync_dir=False` the rename is durable
    only once the caller fsyncs the directory (`fsync_dir`), which lets several writes
    share that fsync (group commit); the content itself is always fsynced first.
    """
    staged = StagedWrite(path, data, mode)
    staged.write()
    try:
        staged.commit()
    finally:
        staged.discard()
    if sync_dir:
        fsync_dir(staged.target.parent)


class StagedWrite:
    """`write_atomic` in steps, so that a batch of writes shares its fsyncs: nothing
    touches the disk until `write_staged` writes the contents of many such files under
    temp names and makes them durable, side by side; `commit` then renames one into
    place, and the caller fsyncs the directory once for all its commits. Until `commit`
    the target is untouched; `discard` removes what is left of a write that is not going
    ahead."""

    def __init__(self, path: str | os.PathLike[str], data: bytes, mode: int = 0o600) -> None:
        self.target = Path(path)
        self._data = data
        self._mode = mode
        self.temp: str | None = None
        self.synced = False
        self.committed = False

    def write(self) -> None:
        """Write the content under a temp name and make it durable (not yet its name);
        on failure nothing is left."""
        fd, self.temp = _create_temp(self.target)
        try:
            try:
                _write_all(fd, self._data)
                os.fchmod(fd, self._mode)
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            self.discard()
            raise
        self.synced = True

    def commit(self) -> None:
        """Rename the synced content over the target (durable once the caller fsyncs the
        directory)."""
        if not self.synced or self.temp is None:
            raise ValueError(f"staged write of {self.target} is not synced; not committing")
        os.replace(self.temp, self.target)
        self.committed = True

    def discard(self) -> None:
        """Remove the temp file unless committed; harmless to call twice."""
        if not self.committed and self.temp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.temp)


def _create_temp(target: Path) -> tuple[int, str]:
    """A new, empty temp file next to `target`, named as `temp_target` recognizes."""
    for _ in range(_TEMP_ATTEMPTS):
        # Unique, not secret (O_EXCL settles a clash): `random`, not a system call per name.
        name = f"{temp_prefix(target.name)}{random.getrandbits(48):012x}{TEMP_SUFFIX}"
        path = os.path.join(target.parent, name)
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name next to {target}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# Concurrent writes and fsyncs: the file system commits the fsyncs together (one journal
# commit for many files on ext4 and xfs), and files in different directories are created
# side by side (a create can cost a millisecond of CPU, see `write_staged`).
_SYNC_THREADS = 16
# The pool is the process's, started on first use and never stopped (its idle threads
# end with the interpreter); its threads' names start with this.
SYNC_THREAD_PREFIX = "fsync"
_sync_pool: ThreadPoolExecutor | None = None
_sync_pool_lock = threading.Lock()


def write_staged(writes: Sequence[StagedWrite]) -> list[Exception | None]:
    """`write` every staged write, concurrently; per write the exception it raised, or
    None once its content is durable.

    Concurrently, not one after the other, because the caller holds every other prepare
    waiting meanwhile: besides the shared fsyncs, creating a file can cost far more than
    writing it (ext4 without a journal skips every inode freed in the last minute, about
    1.4 ms each after 4,000 unprepares), and creates in one directory queue on its lock
    while the records' and the CDI specs' directories can run side by side."""
    if len(writes) <= 1:
        return [_try_write(w) for w in writes]
    pool = _pool()
    pending = [pool.submit(_try_write, w) for w in writes[1:]]
    try:
        first = _try_write(writes[0])
    finally:  # no write still running once the caller moves on (and discards)
        rest = [future.result() for future in pending]
    return [first, *rest]


def _try_write(write: StagedWrite) -> Exception | None:
    try:
        write.write()
    except Exception as exc:  # the caller fails that write's owner, not the batch
        return exc
    return None


def _pool() -> ThreadPoolExecutor:
    global _sync_pool
    with _sync_pool_lock:
        if _sync_pool is None:
            # Threads start on demand: a node preparing one claim at a time uses one.
            _sync_pool = ThreadPoolExecutor(_SYNC_THREADS, thread_name_prefix=SYNC_THREAD_PREFIX)
        return _sync_pool


def remove_durable(path: str | os.PathLike[str], *, sync_dir: bool = True) -> bool:
    """Remove `path` if it exists and make the removal durable (with `sync_dir=False`:
    once the caller fsyncs the directory); True when it existed."""
    target = Path(path)
    try:
        os.unlink(target)
    except FileNotFoundError:
        return False
    if sync_dir:
        fsync_dir(target.parent)
    return True


def rename_durable(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename `src` to `dst` (same directory) and make the rename durable."""
    os.replace(src, dst)
    fsync_dir(Path(dst).parent)


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Flush a directory's entries, so that creates, renames and unlinks in it persist."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_safe_name(name: str) -> str:
    """Return `name` if it is one safe path component, else raise ValueError naming it.

    Safe: 1-255 characters of `[A-Za-z0-9._-]`, starting with a letter or digit (so
    never empty, `.`, `..`, hidden, or containing `/` or NUL).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"unsafe file name {name!r}: empty or not a string")
    if len(name) > _MAX_NAME:
        raise ValueError(f"unsafe file name {name[:40]!r}...: longer than {_MAX_NAME} characters")
    if not _SAFE_NAME.match(name):
        raise ValueError(
            f"unsafe file name {name!r}: only letters, digits, '.', '_' and '-' are allowed, "
            "starting with a letter or digit"
        )
    return name


def safe_child(directory: str | os.PathLike[str], name: str) -> Path:
    """`directory / name`, only if `name` (built from API data) is one safe component."""
    return _child(directory if isinstance(directory, str | Path) else Path(directory), name)


# A call asks for the same few paths several times (the record's, the CDI spec's), and
# building a Path is slow; paths are immutable, so the recent ones are kept (a refused
# name raises and is not kept).
@functools.lru_cache(maxsize=256)
def _child(directory: str | Path, name: str) -> Path:
    return Path(directory) / check_safe_name(name)
