"""Fault injection for fake devices: what `simdra fault` asks for, and how the plugin obeys.

CI pipelines use it to test workloads against device failures without hardware: mark a
device unhealthy, remove it from the published inventory, or make its next N prepares
fail or be slow.

The control file is `<data dir>/faults.json`, one entry per target. A target is a device
name (a DNS label), which applies to that device in every pool, or `pool/device`, which
applies to one pool only. A device is unhealthy or removed when any entry that targets it
says so; prepare faults are taken from the pool-qualified entry first.

Concurrency: both sides change the file. The CLI edits entries, the plugin counts down
the remaining failing/slow prepares. Each change is a read-modify-write done while
holding an exclusive flock on `<data dir>/faults.lock`, and the file is replaced with
`write_atomic`, so no update of either side is lost and readers without the lock (the
plugin's poller) see either the old or the new file, never a torn one. The lock is only
taken to change the file; the plugin's per-prepare check is a `stat` when nothing is
pending for the device. Faults persist across plugin restarts until cleared.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from driver.atomicfile import write_atomic
from driver.devices.model import Inventory, Pool
from driver.kubelet.health import DeviceHealth, HealthStatus
from driver.slices.validation import dns_label_errors, pool_name_errors

log = logging.getLogger(__name__)

FAULT_FILE = "faults.json"
FORMAT_VERSION = 1
DEFAULT_UNHEALTHY_MESSAGE = "marked unhealthy by simdra fault"
DEFAULT_FAIL_MESSAGE = "injected prepare failure"
MAX_MESSAGE_CHARS = 1024
MAX_SLOW_SECONDS = 3600.0
LOCK_TIMEOUT_SECONDS = 10.0

T = TypeVar("T")


class FaultError(ValueError):
    """A fault request or the control file is invalid; the message says which and why."""


class FaultLockTimeout(TimeoutError):
    """Another process held the fault lock for too long."""


class InjectedFault(RuntimeError):
    """A prepare failed because `simdra fault ... fail-prepare` asked for it."""


# --- targets ------------------------------------------------------------------------


def parse_target(text: str) -> tuple[str | None, str]:
    """Split `device` or `pool/device` into (pool or None, device); FaultError if invalid.

    Pool names may contain `/` themselves, so the device is what follows the last one.
    """
    pool, sep, device = text.rpartition("/")
    if dns_label_errors(device, "device"):
        raise FaultError(f"invalid device name {show(device)}: must be a DNS label (at most 63 "
                         "lower-case letters, digits and '-', starting and ending with a letter "
                         "or digit), optionally after 'POOL/'")
    if sep and pool_name_errors(pool, "pool"):
        raise FaultError(f"invalid pool name {show(pool)}: at most 253 characters of "
                         "'/'-separated DNS subdomains")
    return (pool if sep else None), device


def show(text: str, limit: int = 80) -> str:
    """`text` quoted on one line (control characters escaped), cut at `limit`."""
    return json.dumps(text[:limit]) + ("..." if len(text) > limit else "")


def target_key(pool: str | None, device: str) -> str:
    """The entry key for a device in one pool (`pool/device`) or in all pools (`device`)."""
    return f"{pool}/{device}" if pool else device


# --- state (pure) -------------------------------------------------------------------


@dataclass(frozen=True)
class DeviceFaults:
    """The faults of one target. All defaults: no fault (such entries are dropped)."""

    unhealthy: bool = False
    message: str = ""  # why it is unhealthy
    removed: bool = False
    fail_prepares: int = 0  # how many more prepares fail
    fail_message: str = ""
    slow_prepares: int = 0  # how many more prepares are slow
    slow_seconds: float = 0.0

    def is_empty(self) -> bool:
        """True when this entry asks for nothing."""
        return self.normalized() == DeviceFaults()

    def normalized(self) -> DeviceFaults:
        """The same faults with the details of unset ones dropped."""
        return DeviceFaults(
            unhealthy=self.unhealthy,
            message=self.message if self.unhealthy else "",
            removed=self.removed,
            fail_prepares=self.fail_prepares,
            fail_message=self.fail_message if self.fail_prepares else "",
            slow_prepares=self.slow_prepares,
            slow_seconds=self.slow_seconds if self.slow_prepares else 0.0,
        )

    def describe(self) -> str:
        """One line for people, e.g. `unhealthy ("fan"), fail-prepare x2 ("boom")`."""
        parts = []
        if self.unhealthy:
            parts.append(f"unhealthy ({show(self.message)})")
        if self.removed:
            parts.append("removed")
        if self.fail_prepares:
            parts.append(f"fail-prepare x{self.fail_prepares} ({show(self.fail_message)})")
        if self.slow_prepares:
            parts.append(f"slow-prepare x{self.slow_prepares} ({self.slow_seconds:g}s)")
        return ", ".join(parts) or "no faults"

    def to_json(self) -> dict[str, Any]:
        """The file form: only what is set."""
        out: dict[str, Any] = {}
        if self.unhealthy:
            out.update(health="unhealthy", message=self.message)
        if self.removed:
            out["removed"] = True
        if self.fail_prepares:
            out["failPrepares"] = {"count": self.fail_prepares, "message": self.fail_message}
        if self.slow_prepares:
            out["slowPrepares"] = {"count": self.slow_prepares, "seconds": self.slow_seconds}
        return out


@dataclass(frozen=True)
class PrepareEffect:
    """What one prepare of a device must suffer (consumed from the counts)."""

    slow_seconds: float = 0.0
    fail_message: str | None = None
    fails_left: int = 0  # failing prepares still to come after this one


@dataclass(frozen=True)
class FaultState:
    """All faults: target key -> DeviceFaults (only non-empty entries)."""

    entries: Mapping[str, DeviceFaults] = field(default_factory=dict)

    def get(self, key: str) -> DeviceFaults:
        """The entry for `key` (empty when absent)."""
        return self.entries.get(key, DeviceFaults())

    def with_entry(self, key: str, faults: DeviceFaults) -> FaultState:
        """A copy with `key` set to `faults` (removed when empty)."""
        entries = dict(self.entries)
        faults = faults.normalized()
        if faults == DeviceFaults():
            entries.pop(key, None)
        else:
            entries[key] = faults
        return FaultState(dict(sorted(entries.items())))

    def matching(self, pool: str, device: str) -> list[tuple[str, DeviceFaults]]:
        """The entries that target (pool, device): the pool-qualified one first."""
        keys = dict.fromkeys((target_key(pool, device), device))
        return [(key, self.entries[key]) for key in keys if key in self.entries]

    def unhealthy_message(self, pool: str, device: str) -> str | None:
        """Why the device is marked unhealthy, or None when it is not."""
        for _key, faults in self.matching(pool, device):
            if faults.unhealthy:
                return faults.message or DEFAULT_UNHEALTHY_MESSAGE
        return None

    def is_removed(self, pool: str, device: str) -> bool:
        """True when the device is hidden from the inventory."""
        return any(f.removed for _k, f in self.matching(pool, device))

    def has_prepare_faults(self, pool: str, device: str) -> bool:
        """True when the next prepare of the device fails or is slow."""
        return any(f.fail_prepares or f.slow_prepares for _k, f in self.matching(pool, device))

    def consume_prepare(self, pool: str, device: str) -> tuple[FaultState, PrepareEffect]:
        """Take one slow and one failing prepare (where pending) for the device."""
        state, slow, fail = self, 0.0, None
        slow_key = _first(self.matching(pool, device), lambda f: f.slow_prepares > 0)
        if slow_key is not None:
            faults = state.get(slow_key)
            slow = faults.slow_seconds
            state = set_faults(state, slow_key, slow_prepares=faults.slow_prepares - 1)
        fail_key = _first(self.matching(pool, device), lambda f: f.fail_prepares > 0)
        if fail_key is not None:
            faults = state.get(fail_key)
            fail = faults.fail_message or DEFAULT_FAIL_MESSAGE
            state = set_faults(state, fail_key, fail_prepares=faults.fail_prepares - 1)
        fails_left = sum(f.fail_prepares for _k, f in state.matching(pool, device))
        return state, PrepareEffect(slow, fail, fails_left if fail is not None else 0)

    def to_bytes(self) -> bytes:
        """The control file content."""
        doc = {
            "version": FORMAT_VERSION,
            "devices": {key: faults.to_json() for key, faults in self.entries.items()},
        }
        return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()

    @classmethod
    def from_bytes(cls, data: bytes, origin: str) -> FaultState:
        """Parse control file content; FaultError naming `origin` and the problem."""
        try:
            doc = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise FaultError(f"fault file {origin}: not valid JSON: {err}") from None
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
            raise FaultError(f"fault file {origin}: expected an object with "
                             f'"version": {FORMAT_VERSION}')
        unknown = set(doc) - {"version", "devices"}
        if unknown:
            raise FaultError(f"fault file {origin}: unknown fields {sorted(unknown)}")
        devices = doc.get("devices", {})
        if not isinstance(devices, dict):
            raise FaultError(f'fault file {origin}: "devices" must be an object')
        state = cls()
        for key, raw in devices.items():
            try:
                parse_target(key)
                state = state.with_entry(key, _entry_from_json(raw))
            except FaultError as err:
                raise FaultError(f"fault file {origin}: entry {show(key)}: {err}") from None
        return state


def _first(entries: list[tuple[str, DeviceFaults]],
           wanted: Callable[[DeviceFaults], bool]) -> str | None:
    return next((key for key, faults in entries if wanted(faults)), None)


def _entry_from_json(raw: Any) -> DeviceFaults:
    if not isinstance(raw, dict):
        raise FaultError("must be an object")
    unknown = set(raw) - {"health", "message", "removed", "failPrepares", "slowPrepares"}
    if unknown:
        raise FaultError(f"unknown fields {sorted(unknown)}")
    health = raw.get("health", "healthy")
    if health not in ("healthy", "unhealthy"):
        raise FaultError(f'"health" must be "healthy" or "unhealthy", not {health!r}')
    fail = _object(raw, "failPrepares", {"count", "message"})
    slow = _object(raw, "slowPrepares", {"count", "seconds"})
    slow_count = check_count(_typed(slow, "count", int, 0))
    seconds = _typed(slow, "seconds", (int, float), 0.0)
    return DeviceFaults(
        unhealthy=health == "unhealthy",
        message=check_message(_typed(raw, "message", str, "")),
        removed=_typed(raw, "removed", bool, False),
        fail_prepares=check_count(_typed(fail, "count", int, 0)),
        fail_message=check_message(_typed(fail, "message", str, "")),
        slow_prepares=slow_count,
        slow_seconds=check_seconds(seconds) if slow_count else 0.0,
    )


def _object(raw: Mapping[str, Any], name: str, allowed: set[str]) -> Mapping[str, Any]:
    value = raw.get(name, {})
    if not isinstance(value, dict) or set(value) - allowed:
        raise FaultError(f'"{name}" must be an object with fields {sorted(allowed)}')
    return value


def _typed(raw: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = raw.get(name, default)
    # bool is an int in Python; a count of `true` is a mistake, not 1.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise FaultError(f'"{name}" has the wrong type: {value!r}')
    return value


def check_count(count: int) -> int:
    """A remaining-prepares count: 0 or more."""
    if count < 0:
        raise FaultError(f"count must be 0 or more, not {count}")
    return count


def check_seconds(seconds: float) -> float:
    """A slow-prepare delay: more than 0, at most MAX_SLOW_SECONDS."""
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_SLOW_SECONDS):
        raise FaultError(f"seconds must be more than 0 and at most {MAX_SLOW_SECONDS:g}, "
                         f"not {seconds}")
    return float(seconds)


def check_message(message: str) -> str:
    """A fault message: at most MAX_MESSAGE_CHARS characters (the kubelet's limit)."""
    if len(message) > MAX_MESSAGE_CHARS:
        raise FaultError(f"message is {len(message)} characters; at most "
                         f"{MAX_MESSAGE_CHARS} are allowed")
    return message


# --- edits the CLI makes (pure) -----------------------------------------------------


def set_faults(state: FaultState, key: str, **changes: Any) -> FaultState:
    """`key`'s entry with `changes` (DeviceFaults fields) applied."""
    return state.with_entry(key, replace(state.get(key), **changes))


_MARK_RESETS: dict[str | None, dict[str, Any]] = {
    "unhealthy": {"unhealthy": False, "message": ""},
    "removed": {"removed": False},
    None: {},
}


def clear_mark(state: FaultState, key: str, mark: str | None) -> FaultState:
    """Undo `mark` (`unhealthy` or `removed`), or every fault when `mark` is None.

    A plain device name clears it in every pool's entry for that device too. A
    pool-qualified key cannot undo what the all-pools entry says, so that is refused
    rather than leaving the device faulty while the command claims success.
    """
    pool, device = parse_target(key)
    if pool is not None:
        plain = state.get(device)
        if (getattr(plain, mark) if mark else not plain.is_empty()):
            raise FaultError(f"{key}: the entry {device!r} for all pools still says "
                             f"{plain.describe()}; change that one with `{device} ...`")
        keys = [key]
    else:
        keys = [k for k in state.entries if parse_target(k)[1] == device]
    for k in keys:
        state = state.with_entry(k, replace(state.get(k), **_MARK_RESETS[mark]) if mark
                                 else DeviceFaults())
    return state


# --- the control file ---------------------------------------------------------------


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
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return FaultState()
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
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None, None
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
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
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    raise FaultLockTimeout(
                        f"fault lock {path} is still held by another process after "
                        f"{timeout:g}s") from None
                time.sleep(0.005)
        yield
    finally:
        os.close(fd)  # also releases the lock


# --- what the plugin does with the state (pure) ------------------------------------


def apply_removals(inventory: Inventory, state: FaultState) -> Inventory:
    """The inventory without removed devices (pools stay, possibly empty)."""
    if not any(f.removed for f in state.entries.values()):
        return inventory
    return Inventory(pools=tuple(
        Pool(pool.name, tuple(d for d in pool.devices if not state.is_removed(pool.name, d.name)),
             pool.shared_counters)
        for pool in inventory.pools
    ))


def health_of(inventory: Inventory, state: FaultState) -> list[DeviceHealth]:
    """Health of every present device: UNHEALTHY with the message when marked."""
    health = []
    for pool, device in inventory.devices():
        if state.is_removed(pool.name, device.name):
            continue
        message = state.unhealthy_message(pool.name, device.name)
        health.append(DeviceHealth(
            pool.name, device.name,
            HealthStatus.HEALTHY if message is None else HealthStatus.UNHEALTHY,
            message=message or "",
        ))
    return health


# --- the prepare hook ---------------------------------------------------------------


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
        if not self._file.current().has_prepare_faults(pool, device):
            return
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
