"""State is never followed through a link (pure OS calls, nothing of ours): the
plugin's own directories are opened with O_NOFOLLOW (`open_directory`, `real_directory`),
files it reads back are opened with O_NOFOLLOW and must be regular files
(`read_regular`), and a tree is removed one entry at a time relative to an open
directory (`remove_tree`), a link unlinked itself, never followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

# A directory opened as itself: O_NOFOLLOW refuses a link (ELOOP), O_DIRECTORY a file.
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_A_DIRECTORY = (errno.ELOOP, errno.ENOTDIR)


def open_directory(path: str | os.PathLike[str], *, dir_fd: int | None = None) -> int:
    """A descriptor of the directory `path` itself (relative to `dir_fd` if given);
    NotADirectoryError naming it when it is a symlink or not a directory."""
    try:
        return os.open(path, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as err:
        if err.errno not in _NOT_A_DIRECTORY:
            raise
        raise NotADirectoryError(f"{_describe(path, dir_fd)}, not a directory of the "
                                 "plugin's own; not followed") from None


def _describe(path: str | os.PathLike[str], dir_fd: int | None) -> str:
    try:
        info = os.lstat(path, dir_fd=dir_fd)
    except OSError:
        return f"{path} is not a directory"
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symlink (to {os.readlink(path, dir_fd=dir_fd)})"
    return f"{path} is not a directory"


def real_directory(path: str | os.PathLike[str], mode: int) -> Path:
    """`path` as a real directory: created with exactly `mode` when missing (its parent
    must exist), NotADirectoryError when it is a symlink or not a directory. For the
    levels of a tree in the plugin's own directory, where nobody else may write, so the
    check is not raced."""
    target = Path(path)
    with contextlib.suppress(FileExistsError):
        os.mkdir(target, mode)
        os.chmod(target, mode)  # mkdir applies the umask; the new entry is no link
    os.close(open_directory(target))
    return target


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """Up to `limit` + 1 bytes of the regular file `path` (the caller sees a file over
    its limit); FileNotFoundError when it is missing, OSError (one line) when it is a
    symlink, a FIFO or anything but a regular file: never followed, never blocks."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise OSError(f"{path} is a symlink, not a file of the plugin's own; "
                      "not followed") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(f"{path} is a directory, not a file; not read")
        if not stat.S_ISREG(mode):
            raise OSError(f"{path} is not a regular file; not read")
        chunks, left = [], limit + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def remove_tree(directory: str | os.PathLike[str], name: str) -> list[str]:
    """Remove entry `name` of `directory` and, if it is a directory, all under it; the
    symlinks met on the way (their paths below `directory`), each unlinked itself.

    Never follows a link at any level, `directory` included (NotADirectoryError when it
    is one): every level is opened with O_NOFOLLOW relative to its parent's descriptor,
    so a link swapped in mid-way is unlinked, not entered. Not `shutil.rmtree`: it
    raises on a link given as its top, and a path-based top follows links above it."""
    fd = open_directory(directory)
    try:
        return _remove_entry(fd, _one_component(name), name)
    finally:
        os.close(fd)


def _remove_entry(parent_fd: int, name: str, shown: str) -> list[str]:
    try:
        info = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent_fd)
        return [shown] if stat.S_ISLNK(info.st_mode) else []
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as err:
        if err.errno not in _NOT_A_DIRECTORY:
            raise
        os.unlink(name, dir_fd=parent_fd)  # swapped for a link since the lstat
        return [shown]
    links = []
    try:
        for child in sorted(os.listdir(fd)):
            links += _remove_entry(fd, child, f"{shown}/{child}")
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)
    return links


def _one_component(name: str) -> str:
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise ValueError(f"{name!r} is not one path component")
    return name
