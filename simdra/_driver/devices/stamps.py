"""Change stamps: cheap values that differ whenever a backend's `discover()` might.

A backend may offer `change_stamp()` (see `simdra._driver.devices.backend`). The plugin takes
the stamp before each periodic rescan and skips the full discover when it equals the
one taken before the last discover, so an idle node with 10,000 devices costs a few
`stat` or `listdir` calls per rescan instead of rebuilding and comparing its inventory.

A stamp need not see every change (sysfs file contents, NVML facts): the plugin still
runs a full discover every `full_rescan_interval`. It must be cheap, and equal stamps
must mean "very likely unchanged".
"""

from __future__ import annotations

import os
from pathlib import Path

FileStamp = tuple[int, int, int]  # inode, size, mtime in ns


def file_stamp(path: Path) -> FileStamp | None:
    """(inode, size, mtime) of a file, None when it cannot be stat'ed. An atomic
    replace changes the inode, an in-place edit the size or the mtime."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def listing_stamp(directory: Path) -> tuple[str, ...] | None:
    """The sorted entry names of a directory, None when it cannot be listed."""
    try:
        return tuple(sorted(os.listdir(directory)))
    except OSError:
        return None


def link_targets_stamp(directory: Path, names: tuple[str, ...] | None,
                       link: str) -> tuple[str | None, ...]:
    """For each entry `name` of `directory`, the target of its `link` symlink (None when
    there is none): e.g. the driver each PCI function is bound to."""
    targets: list[str | None] = []
    for name in names or ():
        try:
            targets.append(os.readlink(directory / name / link))
        except OSError:
            targets.append(None)
    return tuple(targets)

