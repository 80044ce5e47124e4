"""All faults in force (pure): FaultState, its control-file form, what one prepare of a
device suffers, and the edits the CLI makes (set_faults, clear_mark).

A device is unhealthy or removed when any entry that targets it says so; prepare faults
are taken from the pool-qualified entry first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from simdra._driver.core.textlimits import load_json, one_line
from simdra._driver.devices.faults.entry import DeviceFaults, entry_from_json
from simdra._driver.devices.faults.errors import FaultError
from simdra._driver.devices.faults.targets import parse_target, show, target_key

FORMAT_VERSION = 1
DEFAULT_UNHEALTHY_MESSAGE = "marked unhealthy by simdra fault"
DEFAULT_FAIL_MESSAGE = "injected prepare failure"
# Far above what `simdra fault` writes (an entry is about 100 bytes, nested 4 levels), so
# that a hostile file costs neither the memory nor the stack of the plugin reading it.
MAX_FILE_BYTES = 16 * 2**20
MAX_FILE_DEPTH = 16


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
        devices = _devices_of(data, origin)
        state = cls()
        for key, raw in devices.items():
            try:
                parse_target(key)
                state = state.with_entry(key, entry_from_json(raw))
            except FaultError as err:
                raise FaultError(f"fault file {origin}: entry {show(key)}: {err}") from None
        return state


def _devices_of(data: bytes, origin: str) -> dict[str, Any]:
    """The `devices` object of a control file, after checking the document around it."""
    try:
        doc = load_json(data, max_bytes=MAX_FILE_BYTES, max_depth=MAX_FILE_DEPTH)
    except ValueError as err:  # not JSON, over a limit, an integer of too many digits
        raise FaultError(f"fault file {origin}: not valid JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise FaultError(f"fault file {origin}: expected an object with "
                         f'"version": {FORMAT_VERSION}')
    unknown = set(doc) - {"version", "devices"}
    if unknown:
        raise FaultError(f"fault file {origin}: unknown fields {one_line(sorted(unknown), 160)}")
    devices = doc.get("devices", {})
    if not isinstance(devices, dict):
        raise FaultError(f'fault file {origin}: "devices" must be an object')
    return devices


def _first(entries: list[tuple[str, DeviceFaults]],
           wanted: Callable[[DeviceFaults], bool]) -> str | None:
    return next((key for key, faults in entries if wanted(faults)), None)


# --- edits the CLI makes ------------------------------------------------------------


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
