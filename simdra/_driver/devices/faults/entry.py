"""The faults of one target (pure): DeviceFaults, its control-file form, and the checks on
counts, delays and messages that both the CLI and the file parser apply."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simdra._driver.core.textlimits import one_line
from simdra._driver.devices.faults.errors import FaultError
from simdra._driver.devices.faults.targets import show

MAX_MESSAGE_CHARS = 1024
MAX_SLOW_SECONDS = 3600.0
SHOWN_CHARS = 80  # of a bad value in an error: the file may hold anything


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


def entry_from_json(raw: Any) -> DeviceFaults:
    """Parse one entry of the control file (the `to_json` form); FaultError saying why not."""
    if not isinstance(raw, dict):
        raise FaultError("must be an object")
    unknown = set(raw) - {"health", "message", "removed", "failPrepares", "slowPrepares"}
    if unknown:
        raise FaultError(f"unknown fields {one_line(sorted(unknown), 2 * SHOWN_CHARS)}")
    health = raw.get("health", "healthy")
    if health not in ("healthy", "unhealthy"):
        raise FaultError(f'"health" must be "healthy" or "unhealthy", not {_shown(health)}')
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
        raise FaultError(f'"{name}" has the wrong type: {_shown(value)}')
    return value


def check_count(count: int) -> int:
    """A remaining-prepares count: 0 or more."""
    if count < 0:
        raise FaultError(f"count must be 0 or more, not {_shown(count)}")
    return count


def check_seconds(seconds: float) -> float:
    """A slow-prepare delay: more than 0, at most MAX_SLOW_SECONDS."""
    try:
        value = float(seconds)
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not (math.isfinite(value) and 0 < value <= MAX_SLOW_SECONDS):
        raise FaultError(f"seconds must be more than 0 and at most {MAX_SLOW_SECONDS:g}, "
                         f"not {_shown(seconds)}")
    return value


def check_message(message: str) -> str:
    """A fault message: at most MAX_MESSAGE_CHARS characters (the kubelet's limit)."""
    if len(message) > MAX_MESSAGE_CHARS:
        raise FaultError(f"message is {len(message)} characters; at most "
                         f"{MAX_MESSAGE_CHARS} are allowed")
    return message


def _shown(value: Any) -> str:
    """A bad value from the file as an error shows it: its repr, on one line, clipped."""
    return one_line(repr(value), SHOWN_CHARS)
