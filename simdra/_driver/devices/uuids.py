"""Stable identities for simulated devices."""

from __future__ import annotations

import uuid

# Fixed namespace so uuid5 gives the same UUID for the same (driver, node, device) forever.
_UUID_NAMESPACE = uuid.UUID("6b7e1f8a-58a4-4c0e-9a55-2f0f4b1c3d21")


def stable_uuid(driver_name: str, node_name: str, device_name: str) -> str:
    """A UUID that is the same for the same device on the same node, and unique otherwise.

    Example::

        stable_uuid("crypto.example.com", "node-1", "crypto-0")  # same text every call
    """
    return str(uuid.uuid5(_UUID_NAMESPACE, f"{driver_name}/{node_name}/{device_name}"))
