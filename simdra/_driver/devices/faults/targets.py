"""Fault targets (pure): `device` for a device in every pool, `pool/device` for one pool."""

from __future__ import annotations

import json

from simdra._driver.core.validation import dns_label_errors, pool_name_errors
from simdra._driver.devices.faults.errors import FaultError


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
