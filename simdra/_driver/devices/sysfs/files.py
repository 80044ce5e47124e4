"""Tolerant readers for sysfs attribute files and links.

Devices come and go while we scan (hot-unplug, driver rebinds) and some attributes refuse
to be read in some states (a down link's `speed` fails with EINVAL), so every reader
returns None instead of raising: a missing fact is left out, never fatal.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def read_text(path: Path) -> str | None:
    """The stripped content of a sysfs file, or None when it is absent or unreadable."""
    try:
        with open(path, "rb") as handle:
            return handle.read().decode(errors="replace").strip()
    except (OSError, ValueError):
        return None


def read_int(path: Path, base: int = 10) -> int | None:
    """The integer in a sysfs file (`base` 16 accepts a `0x` prefix), or None."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


def resolve(path: Path) -> Path | None:
    """The canonical path behind `path` (following symlinks), or None if it is gone."""
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return None


def follow(directory: Path, name: str) -> Path | None:
    """The canonical path of entry `name` of the canonical `directory`, or None if gone.

    sysfs links are a single hop into real directories (`bus/pci/devices/X ->
    ../../../devices/pci0000:00/X`), so reading the link and normalising the result costs
    one system call where a full `resolve()` would stat every component of the path. A
    target that is not where it should be falls back to a full resolve.
    """
    entry = os.path.join(directory, name)
    try:
        target = os.readlink(entry)
    except OSError as err:
        if err.errno == errno.EINVAL:  # a real directory or file, already canonical
            return Path(entry)
        return None
    followed = os.path.normpath(os.path.join(directory, target))
    return Path(followed) if os.path.isdir(followed) else resolve(Path(entry))


def link_name(path: Path) -> str | None:
    """The last component of a symlink's target (a bound driver's name), or None."""
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None
