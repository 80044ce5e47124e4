"""What an unreadable checkpoint record still reserves (pure reading, no writes).

A record that cannot be trusted does not say which devices its claim holds, yet the
claim may be running: forgetting its devices would let the node prepare them for
another claim. What a container can actually have been given is in the claim's CDI
spec, whose file name follows from the claim UID alone: each CDI device of this driver
carries `SIMDRA_DEVICE_<ID>_POOL` and `_NAME` env vars (see
`simdra._driver.claims.plan.cdi`), so the spec names the (pool, device) pairs to keep
reserved until the kubelet unprepares the claim.

When there is no readable spec, nothing can be reserved, and nothing needs to be: the
spec is written after the record and removed before it, so a claim without one has no
container that was given its devices (the kubelet's retries of that claim fail on the
unreadable record). The reservation then says so, for the log and `simdra usage`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from simdra._driver.atomicfile import safe_child
from simdra._driver.claims.plan.cdi import ENV_PREFIX, ID_LENGTH, spec_file_name
from simdra._driver.core.nofollow import read_regular
from simdra._driver.core.textlimits import load_json, one_line
from simdra._driver.core.validation.names import dns_label_errors, pool_name_errors

MAX_SPEC_BYTES = 4 * 2**20
MAX_SPEC_DEPTH = 32

DeviceKey = tuple[str, str]  # (pool, device)


@dataclass(frozen=True)
class Reservation:
    """The devices an unreadable record keeps reserved, and where that is known from."""

    claim_uid: str
    devices: tuple[DeviceKey, ...]
    source: str  # the CDI spec read, or why none could be

    @property
    def known(self) -> bool:
        """False when no readable CDI spec names the claim's devices."""
        return bool(self.devices)

    def describe(self) -> str:
        """One line for logs and `simdra usage`."""
        if not self.devices:
            return f"its devices are unknown ({self.source}), so none are reserved"
        names = ", ".join(f"{pool}/{device}" for pool, device in self.devices)
        return f"reserves {names} (named by {self.source}) until unprepared"


def reservation(
    cdi_root: str | os.PathLike[str], driver_name: str, claim_uid: str
) -> Reservation:
    """The devices the CDI spec of `claim_uid` names; never raises."""
    try:
        path = safe_child(cdi_root, spec_file_name(driver_name, claim_uid))
    except ValueError as exc:
        return Reservation(claim_uid, (), f"no CDI spec file name: {one_line(exc)}")
    try:
        data = read_regular(path, MAX_SPEC_BYTES)  # a link is refused, never followed
        spec = load_json(data, max_bytes=MAX_SPEC_BYTES, max_depth=MAX_SPEC_DEPTH)
        devices = spec_devices(spec)
    except FileNotFoundError:
        return Reservation(claim_uid, (), f"no CDI spec {path}")
    except Exception as exc:  # an unreadable spec is reported, never raised
        return Reservation(claim_uid, (), f"CDI spec {path} unreadable: {one_line(exc)}")
    if not devices:
        return Reservation(claim_uid, (), f"CDI spec {path} names no devices of this driver")
    return Reservation(claim_uid, devices, f"CDI spec {path}")


def spec_devices(spec: Any) -> tuple[DeviceKey, ...]:
    """(pool, device) of every CDI device whose env names a valid pool and device."""
    found: dict[DeviceKey, None] = {}
    for device in _list(_dict(spec).get("devices")):
        env = _list(_dict(_dict(device).get("containerEdits")).get("env"))
        by_id: dict[str, dict[str, str]] = {}
        for entry in env:
            if not isinstance(entry, str) or not entry.startswith(ENV_PREFIX):
                continue
            name, _, value = entry.partition("=")
            unit, _, key = name[len(ENV_PREFIX) :].partition("_")
            if len(unit) == ID_LENGTH and key in ("POOL", "NAME"):
                by_id.setdefault(unit, {})[key] = value
        for values in by_id.values():
            pool, device_name = values.get("POOL"), values.get("NAME")
            if not (pool_name_errors(pool, "pool") or dns_label_errors(device_name, "device")):
                found[(str(pool), str(device_name))] = None
    return tuple(found)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
