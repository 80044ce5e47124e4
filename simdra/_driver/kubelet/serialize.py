"""Serialization of prepare/unprepare calls, as the Go helper does by default (api-facts 1.4).

Within one process a lock is enough. During a rolling update two plugin instances serve
the same node, so a lock file in the shared data directory also serializes across them.
"""

from __future__ import annotations

import fcntl
import os
import threading
from types import TracebackType


class CallSerializer:
    """Context manager: one prepare/unprepare at a time, optionally across processes."""

    def __init__(self, lock_file: str | None = None) -> None:
        """lock_file: path of a file to flock around each call (None: in-process only)."""
        self.lock_file = lock_file
        self._lock = threading.Lock()
        self._fd: int | None = None

    def __enter__(self) -> CallSerializer:
        self._lock.acquire()
        if self.lock_file is None:
            return self
        try:
            # Read-only: flock needs no write access, and closing a descriptor opened
            # for writing is an inotify event (IN_CLOSE_WRITE) in the data directory,
            # which the live-devices thread watches for the fault file.
            # O_NOFOLLOW: a link planted at the lock's name is refused, never created
            # or opened at its target (start-up refuses one too; this covers the rest).
            self._fd = os.open(self.lock_file,
                               os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            self._release_file()
            self._lock.release()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._release_file()
        finally:
            self._lock.release()

    def _release_file(self) -> None:
        if self._fd is not None:
            # Closing the descriptor drops the flock.
            os.close(self._fd)
            self._fd = None


class NoSerializer:
    """Context manager that does nothing: for preparers that handle concurrency themselves."""

    def __enter__(self) -> NoSerializer:
        return self

    def __exit__(self, *exc: object) -> None:
        return None
