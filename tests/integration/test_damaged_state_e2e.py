"""`simdra run` on a node whose plugin state is damaged: it refuses to start with one
line naming the path, and the kubelet never sees a socket of it (a plugin that
registers and then exits makes the kubelet send calls to nobody)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from simdra._driver.testing.cluster import LocalCluster

# <sys/inotify.h>: every way a name can appear in a directory.
_IN_CREATE, _IN_MOVED_TO = 0x100, 0x80
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name


class NamesAppearing:
    """Every name created or moved into `directories` while open (inotify queues them,
    so nothing is missed however briefly it existed); `names()` reads them."""

    def __init__(self, *directories: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self._fd >= 0, os.strerror(ctypes.get_errno())
        self._dirs: dict[int, Path] = {}
        for directory in directories:
            wd = libc.inotify_add_watch(self._fd, os.fsencode(directory),
                                        _IN_CREATE | _IN_MOVED_TO)
            assert wd >= 0, f"{directory}: {os.strerror(ctypes.get_errno())}"
            self._dirs[wd] = directory

    def names(self) -> list[Path]:
        """The paths that appeared so far."""
        data = b""
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._fd, 65536):
                data += chunk
        found, offset = [], 0
        while offset < len(data):
            wd, _, _, size = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size: offset + _EVENT.size + size].rstrip(b"\0")
            found.append(self._dirs[wd] / os.fsdecode(name))
            offset += _EVENT.size + size
        return found

    def close(self) -> None:
        os.close(self._fd)


@contextlib.contextmanager
def names_appearing(*directories: Path) -> Iterator[NamesAppearing]:
    watch = NamesAppearing(*directories)
    try:
        yield watch
    finally:
        watch.close()


def _claims_is_a_file(data_dir: Path) -> Path:
    (data_dir / "claims").write_text("")
    return data_dir / "claims"


def _generation_is_a_directory(data_dir: Path) -> Path:
    (data_dir / "claims.generation").mkdir()
    return data_dir / "claims.generation"


@pytest.mark.parametrize(("damage", "says"), [
    (_claims_is_a_file, "is a regular file, not a directory: move it aside"),
    (_generation_is_a_directory, "is a directory, not a regular file: move it aside"),
])
def test_damaged_state_refuses_to_start_before_any_socket_appears(
    cluster: LocalCluster, damage: Callable[[Path], Path], says: str
) -> None:
    cluster.data_dir.mkdir(parents=True)
    damaged = damage(cluster.data_dir)

    with names_appearing(cluster.registrar_dir, cluster.data_dir) as watch:
        plugin = cluster.start_plugin(wait=False)
        code = plugin.process.wait(60)  # the timeout only bounds a hang
        appeared = watch.names()

    assert code == 1, plugin.log()
    lines = plugin.log().splitlines()  # stdout is empty: this is stderr
    assert len(lines) == 1, plugin.log()
    assert f"{damaged} {says}" in lines[0]
    assert appeared == []  # no socket, not even under a temporary name; no lock file
