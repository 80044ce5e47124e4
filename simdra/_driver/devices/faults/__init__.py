"""Fault injection for fake devices: what `simdra fault` asks for, and how the plugin obeys.

CI pipelines use it to test workloads against device failures without hardware: mark a
device unhealthy, remove it from the published inventory, or make its next N prepares
fail or be slow.

The control file is `<data dir>/faults.json`, one entry per target. A target is a device
name (a DNS label), which applies to that device in every pool, or `pool/device`, which
applies to one pool only. A device is unhealthy or removed when any entry that targets it
says so; prepare faults are taken from the pool-qualified entry first.

Modules:
- `targets`: parsing `device` / `pool/device` targets;
- `entry`: DeviceFaults, one target's faults, and the checks on counts, delays, messages;
- `state`: FaultState, all faults, its file form, and the CLI's edits (pure);
- `control`: the control file, change detection and the lock protocol (side effects),
  and PrepareFaults, the hook that fails or slows prepares;
- `effects`: removals from the inventory and health reports (pure);
- `errors`: FaultError, FaultLockTimeout, InjectedFault.
"""

from simdra._driver.devices.faults.control import (
    FAULT_FILE,
    LOCK_TIMEOUT_SECONDS,
    FaultFile,
    PrepareFaults,
    fault_file_path,
    hold_lock,
)
from simdra._driver.devices.faults.effects import apply_removals, health_of
from simdra._driver.devices.faults.entry import (
    MAX_MESSAGE_CHARS,
    MAX_SLOW_SECONDS,
    DeviceFaults,
    check_count,
    check_message,
    check_seconds,
)
from simdra._driver.devices.faults.errors import FaultError, FaultLockTimeout, InjectedFault
from simdra._driver.devices.faults.state import (
    DEFAULT_FAIL_MESSAGE,
    DEFAULT_UNHEALTHY_MESSAGE,
    FORMAT_VERSION,
    FaultState,
    PrepareEffect,
    clear_mark,
    set_faults,
)
from simdra._driver.devices.faults.targets import parse_target, show, target_key

__all__ = [
    "DEFAULT_FAIL_MESSAGE",
    "DEFAULT_UNHEALTHY_MESSAGE",
    "FAULT_FILE",
    "FORMAT_VERSION",
    "LOCK_TIMEOUT_SECONDS",
    "MAX_MESSAGE_CHARS",
    "MAX_SLOW_SECONDS",
    "DeviceFaults",
    "FaultError",
    "FaultFile",
    "FaultLockTimeout",
    "FaultState",
    "InjectedFault",
    "PrepareEffect",
    "PrepareFaults",
    "apply_removals",
    "check_count",
    "check_message",
    "check_seconds",
    "clear_mark",
    "fault_file_path",
    "health_of",
    "hold_lock",
    "parse_target",
    "set_faults",
    "show",
    "target_key",
]
