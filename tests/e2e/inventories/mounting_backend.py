"""A custom device backend for the real-node scenarios: the sysfs backend, plus a
read-only bind mount of a host directory in the container edits of every GPU.

No built-in backend mounts anything, yet a backend's container edits are copied whole
into the claim's CDI spec (docs/driver-authors.md), mounts included, and the spec's
cdiVersion must cover them (a typed mount needs 0.4.0). The scenario copies this file
into the simulated tree as `simdra_e2e_backend.py` and runs the plugin with
`DEVICE_BACKEND=simdra_e2e_backend:MountingSysfsBackend`, its directory on PYTHONPATH
and the host directory to mount in SIMDRA_E2E_SHARE.
"""

from __future__ import annotations

import os

from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.kinds.sysfs.backend import SysfsBackend

CONTAINER_PATH = "/run/simdra-e2e/share"


class MountingSysfsBackend(SysfsBackend):
    """SysfsBackend whose GPUs also mount SIMDRA_E2E_SHARE at CONTAINER_PATH, read-only."""

    def discover(self) -> Inventory:
        """The sysfs inventory with the mount added to each GPU's container edits."""
        found = super().discover()
        return Inventory(pools=tuple(
            Pool(p.name, tuple(_with_mount(d) for d in p.devices), p.shared_counters)
            for p in found.pools))


def _with_mount(device: Device) -> Device:
    if device.attribute("type") != "gpu":
        return device
    mount = {"hostPath": os.environ["SIMDRA_E2E_SHARE"], "containerPath": CONTAINER_PATH,
             "type": "bind", "options": ["ro", "nosuid", "nodev", "rbind"]}
    edits = dict(device.container_edits)
    edits["mounts"] = [*edits.get("mounts", []), mount]
    return Device(spec=device.spec, container_edits=edits)
