"""Device health states: what the device lane reports and the kubelet's health stream sends.

Plain values without gRPC, so that the device layer can say a device is unhealthy
without importing the kubelet's generated code; `simdra._driver.kubelet.health` turns them into
DRAResourceHealth messages.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class HealthStatus(enum.IntEnum):
    """Device health; values equal the DRAResourceHealth proto enum numbers."""

    UNKNOWN = 0
    HEALTHY = 1
    UNHEALTHY = 2


@dataclass(frozen=True)
class DeviceHealth:
    """The health of one device of the driver."""

    pool_name: str
    device_name: str
    health: HealthStatus
    last_updated: int = 0  # Unix seconds; 0 means "now" when sent
    timeout_seconds: int = 0  # 0: the kubelet's default (30 s)
    message: str = ""
