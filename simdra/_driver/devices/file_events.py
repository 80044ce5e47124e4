"""Sleep until a file of interest changes (Linux inotify, through libc), so that watching
the inventory and fault files costs nothing while they stay as they are.

A directory is watched rather than the file: an atomic write replaces the file (a new
inode), which a watch on the old one would not follow. Only events for the files' own
names wake the waiter up for good; other files in the same directory (the data
directory's lock and generation files, written by every prepare) are read and ignored.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import struct
import time
from collections.abc import Iterable
from pathlib import Path

# <sys/inotify.h>: whatever can give a file new content or take it away.
_IN_ATTRIB, _IN_CLOSE_WRITE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x4, 0x8, 0x40, 0x80
_IN_CREATE, _IN_DELETE, _IN_DELETE_SELF, _IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
_IN_Q_OVERFLOW = 0x4000  # events were lost: treat as a change
_MASK = (_IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
         | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF)
_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len; then len bytes of name
_READ_BYTES = 65536


class FileEvents:
    """Waits for changes to `files`; raises OSError where inotify cannot be used (the
    caller then polls)."""

    def __init__(self, files: Iterable[Path]) -> None:
        self._names = {os.fsencode(path.name) for path in files}
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self._fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._closed = False
        try:
            for directory in sorted({os.fsencode(path.parent) for path in files}):
                if libc.inotify_add_watch(self._fd, directory, _MASK) < 0:
                    errno = ctypes.get_errno()
                    raise OSError(errno, f"cannot watch {os.fsdecode(directory)}: "
                                         f"{os.strerror(errno)}")
        except BaseException:
            self.close()
            raise

    def wait(self, timeout: float | None) -> bool:
        """Sleep until a watched file changed (True), `interrupt()` or `timeout` seconds
        (False). Events for other files in the same directories are read and slept
        through: every prepare writes the generation file next to the fault file, and
        handing each such wake-up to the caller made it re-read its files in the middle
        of the prepare (which then waited for the GIL)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self._fd, self._wake_r], [], [], left)
            if self._wake_r in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_r, _READ_BYTES)
                return self._fd in ready and self._relevant(self._drain())
            if not ready:
                return False  # timed out
            if self._relevant(self._drain()):
                return True

    def interrupt(self) -> None:
        """End a `wait` now (from another thread)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        """Release the descriptors; harmless to call twice."""
        if not self._closed:
            self._closed = True
            for fd in (self._fd, self._wake_r, self._wake_w):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _drain(self) -> bytes:
        data = b""
        with contextlib.suppress(BlockingIOError):
            while True:
                chunk = os.read(self._fd, _READ_BYTES)
                if not chunk:
                    break
                data += chunk
        return data

    def _relevant(self, data: bytes) -> bool:
        """Whether the events in `data` name a watched file (or may have: lost events,
        the directory itself moved or removed)."""
        offset = 0
        while offset + _EVENT.size <= len(data):
            _, mask, _, size = _EVENT.unpack_from(data, offset)
            name = data[offset + _EVENT.size: offset + _EVENT.size + size].rstrip(b"\0")
            offset += _EVENT.size + size
            if mask & (_IN_Q_OVERFLOW | _IN_DELETE_SELF | _IN_MOVE_SELF) or name in self._names:
                return True
        return False
