"""The control file `<data dir>/faults.json` and the lock that serialises changes to it.

Both sides change the file: the CLI edits entries, the plugin counts down the remaining
failing/slow prepares. Each change is a read-modify-write done while holding an
exclusive flock on `<data dir>/faults.lock`, and the file is replaced with
`write_atomic`, so no update of either side is lost and readers without the lock (the
plugin's poller) see either the old or the new file, never a torn one. The lock is only
taken to change the file; the plugin's per-prepare check is a `stat` when nothing is
pending for the device. Faults persist across plugin restarts until cleared.

`PrepareFaults` is the plugin's side of fail-prepare and slow-prepare faults: the hook
the preparer calls before it prepares each device. With no fault in force (the file
absent, or listing none) it costs the file's `stat` and returns, without a look at the
entries.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from simdra._driver.atomicfile import write_atomic
from simdra._driver.core.nofollow import read_regular
from simdra._driver.devices.faults.errors import FaultError, FaultLockTimeout, InjectedFault
from simdra._driver.devices.faults.state import FaultState

MAX_FAULT_FILE_BYTES = 64 << 20  # far more than any fault list `simdra fault` writes
# What `_read_if_new` reads from a link or a file that is not regular: nothing.
_NOT_A_FILE = b"\0"

log = logging.getLogger(__name__)

FAULT_FILE = "faults.json"
LOCK_TIMEOUT_SECONDS = 10.0

T = TypeVar("T")


def fault_file_path(data_dir: str | os.PathLike[str]) -> Path:
    """`<data dir>/faults.json`."""
    return Path(data_dir) / FAULT_FILE


class FaultFile:
    """The control file as the plugin reads it: cheap change detection, last good state.

    `current()` and `load_if_changed()` only re-read the file when its identity (inode,
    size, mtime) changed. A corrupt file is logged once, naming the file, and the last
    good state stays in force. A missing file means no faults. Thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, ...] | None = None
        self._state = FaultState()
        self._generation = 0  # bumped on every change of the good state
        self._reported = -1  # the generation load_if_changed last returned
        self.error: str | None = None  # why the file on disk is not in force

    @property
    def lock_path(self) -> Path:
        """The flock file that serialises changes (`faults.lock` beside `faults.json`)."""
        return self.path.with_suffix(".lock")

    def load(self) -> FaultState:
        """Read the file now; FaultError when it is corrupt."""
        try:  # a link is refused, never followed
            data = read_regular(self.path, MAX_FAULT_FILE_BYTES)
        except FileNotFoundError:
            return FaultState()
        except OSError as err:
            raise FaultError(f"fault file: {err}: move it aside") from None
        if len(data) > MAX_FAULT_FILE_BYTES:
            raise FaultError(f"fault file {self.path} is larger than {MAX_FAULT_FILE_BYTES} "
                             "bytes: move it aside")
        return FaultState.from_bytes(data, str(self.path))

    def current(self) -> FaultState:
        """The faults in force (re-read only when the file changed)."""
        with self._lock:
            self._refresh_locked()
            return self._state

    def load_if_changed(self) -> FaultState | None:
        """The faults in force when they changed since the last call, else None."""
        with self._lock:
            self._refresh_locked()
            if self._reported == self._generation:
                return None
            self._reported = self._generation
            return self._state

    def _refresh_locked(self) -> None:
        identity, data = self._read_if_new()
        if identity == self._seen:
            return
        self._seen = identity
        try:
            if data is _NOT_A_FILE:
                raise FaultError(f"fault file {self.path} is a symlink or not a regular "
                                 "file; not followed: move it aside")
            state = FaultState() if data is None else FaultState.from_bytes(data, str(self.path))
        except FaultError as err:
            self.error = f"{err}; keeping the previous faults"
            log.error("%s", self.error)
            return
        self.error = None
        if state != self._state:
            self._state = state
            self._generation += 1

    def _read_if_new(self) -> tuple[tuple[int, ...] | None, bytes | None]:
        """(identity, content); content is read from the same open file it describes."""
        try:  # a link is not followed, a FIFO does not block
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None, None
        except OSError as err:
            if err.errno != errno.ELOOP:
                raise
            st = os.lstat(self.path)
            return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), _NOT_A_FILE
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns), _NOT_A_FILE
            identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            return identity, (None if identity == self._seen else f.read())

    def update(self, change: Callable[[FaultState], tuple[FaultState, T]],
               timeout: float = LOCK_TIMEOUT_SECONDS) -> T:
        """Read-modify-write under the fault lock; returns what `change` returns.

        `change` gets the state on disk (FaultError when the file is corrupt) and returns
        the new state and a result. The file is only rewritten when the state changed.
        """
        with hold_lock(self.lock_path, timeout):
            before = self.load()
            after, result = change(before)
            if after != before:
                write_atomic(self.path, after.to_bytes())
            return result

    def reset(self, timeout: float = LOCK_TIMEOUT_SECONDS) -> None:
        """Remove every fault, whatever the file holds (also a corrupt one)."""
        with hold_lock(self.lock_path, timeout):
            write_atomic(self.path, FaultState().to_bytes())


@contextlib.contextmanager
def hold_lock(path: Path, timeout: float) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created when missing); FaultLockTimeout."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while not _try_lock(fd):
            if time.monotonic() >= deadline:
                raise FaultLockTimeout(
                    f"fault lock {path} is still held by another process after "
                    f"{timeout:g}s")
            time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # also releases the lock


def _try_lock(fd: int) -> bool:
    """Take the exclusive flock without waiting; False when another process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise
        return False
    return True


class PrepareFaults:
    """Called by the preparer before it prepares each device; obeys prepare faults.

    `before_device` takes one slow prepare (sleeps) and one failing prepare (raises
    InjectedFault) of the device, where pending. Counts are taken under the fault lock
    and written back before sleeping, so a concurrent `simdra fault` is never lost.
    `close()` cuts short sleeps in progress (plugin shutdown).
    """

    def __init__(self, fault_file: FaultFile,
                 sleep: Callable[[float], object] | None = None) -> None:
        """sleep: how to wait out a slow prepare (default: a wait that `close()` ends)."""
        self._file = fault_file
        self._closed = threading.Event()
        self._sleep = sleep or self._closed.wait

    def before_device(self, pool: str, device: str) -> None:
        """Apply the device's pending prepare faults; InjectedFault when it must fail."""
        faults = self._file.current()
        if not faults.entries or not faults.has_prepare_faults(pool, device):
            return  # the common case, no fault in force, decided here at once
        try:
            effect = self._file.update(lambda s: s.consume_prepare(pool, device))
        except (FaultError, FaultLockTimeout, OSError) as err:
            log.error("prepare of %s/%s: fault injection skipped: %s", pool, device, err)
            return
        if effect.slow_seconds:
            log.info("prepare of %s/%s: injected delay of %gs", pool, device,
                     effect.slow_seconds)
            self._sleep(effect.slow_seconds)
        if effect.fail_message is not None:
            raise InjectedFault(
                f"device {pool}/{device}: {effect.fail_message} (injected by simdra fault; "
                f"{effect.fails_left} more failing prepares pending)")

    def close(self) -> None:
        """End sleeps in progress and skip future ones."""
        self._closed.set()
