"""Removing sockets that their server left behind: temporary ones of an interrupted bind,
and those of instances of this driver that are gone (`--pod-uid`: each pod has its own).

Only sockets, only names that are ours, and only when nothing listens on them: a server
binds under a temporary name and renames once it listens (`simdra._driver.kubelet.server`), so
a rolling update's other instance answers a connect and is never touched. A socket
changed in the last `grace_s` seconds is kept too: where the temporary name does not
fit the path limit, a starting server binds at its real name a moment before listening.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import stat
import time
from collections.abc import Callable, Iterable

from simdra._driver.kubelet.sockets import is_instance_dra_socket, is_instance_registration_socket

log = logging.getLogger(__name__)

TEMP_SOCKET_PREFIX = ".simdra-"
_TEMP_SOCKET = re.compile(r"^\.simdra-[0-9a-f]{8}\.sock$")
STARTING_GRACE_S = 5.0


def remove_stale_temp_sockets(directory: str) -> list[str]:
    """Remove temporary sockets (`.simdra-<8 hex>.sock`) that a server killed between
    bind and rename left in `directory`; returns the removed paths.

    A server binds and listens in one step, so another instance's temporary socket that
    is about to be renamed answers a connect and is kept.
    """
    return _remove_dead(directory, lambda name: _TEMP_SOCKET.match(name) is not None, (), 0.0)


def remove_stale_instance_sockets(
    driver_name: str,
    data_dir: str,
    registry_dir: str,
    keep: Iterable[str],
    *,
    grace_s: float | None = None,
) -> list[str]:
    """Remove the DRA sockets (in `data_dir`) and registration sockets (in
    `registry_dir`) of this driver's other instances that nobody listens on, never a
    path in `keep` (this instance's own); returns the removed paths."""
    grace_s = STARTING_GRACE_S if grace_s is None else grace_s
    mine = {os.path.normpath(p) for p in keep}
    removed = _remove_dead(data_dir, is_instance_dra_socket, mine, grace_s)
    return removed + _remove_dead(
        registry_dir, lambda name: is_instance_registration_socket(driver_name, name), mine,
        grace_s,
    )


def _remove_dead(
    directory: str, ours: Callable[[str], bool], keep: Iterable[str], grace_s: float
) -> list[str]:
    removed: list[str] = []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return removed
    for name in names:
        path = os.path.join(directory, name)
        if not ours(name) or os.path.normpath(path) in keep or not _dead(path, grace_s):
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed.append(path)
            log.info("removed stale socket %s (nothing listens on it)", path)
    return removed


def _dead(path: str, grace_s: float) -> bool:
    """True for a socket at path, older than grace_s, that refuses connections."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or time.time() - st.st_ctime < grace_s:
        return False
    return not listening(path)


def listening(path: str) -> bool:
    """True when a process accepts connections on the unix socket at path."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except (ConnectionRefusedError, FileNotFoundError):
        return False
    except OSError:
        return True  # e.g. a full backlog or a timeout: someone is there, keep it
    finally:
        probe.close()
    return True


def socket_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the socket at path, or None when no socket is there."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None
