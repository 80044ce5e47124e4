"""Durable file operations and safe file names.

Every file the driver owns (CDI specs, checkpoint records) is written so that a crash at
any instant leaves either the old content or the new content, never a torn file: write a
temp file in the same directory, fsync it, rename it over the target, fsync the directory.
File names built from API data (claim UIDs) go through `safe_child` first, so a hostile
value can never name a path outside the directory it is meant for.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from pathlib import Path

# Temp files start with a dot and end in ".tmp": CDI runtimes only load *.json/*.yaml,
# and the directory scans of this project skip dot-files, so a temp file left by a crash
# is never mistaken for a real one.
TEMP_SUFFIX = ".tmp"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MAX_NAME = 255  # NAME_MAX of common Linux file systems


def temp_prefix(target_name: str) -> str:
    """The prefix of temp files `write_atomic` creates for `target_name`."""
    return f".{target_name}."


def write_atomic(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data` atomically and durably.

    A reader sees either the previous file or the complete new one; once this returns,
    the new content survives a power loss.
    """
    target = Path(path)
    fd, tmp_name = tempfile.mkstemp(
        prefix=temp_prefix(target.name), suffix=TEMP_SUFFIX, dir=target.parent
    )
    try:
        with os.fdopen(fd, "wb") as tmp:
            tmp.write(data)
            tmp.flush()
            os.fchmod(tmp.fileno(), mode)
            os.fsync(tmp.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    fsync_dir(target.parent)


def remove_durable(path: str | os.PathLike[str]) -> bool:
    """Remove `path` if it exists and make the removal durable; True when it existed."""
    target = Path(path)
    try:
        os.unlink(target)
    except FileNotFoundError:
        return False
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
    return Path(directory) / check_safe_name(name)
