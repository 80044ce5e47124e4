"""The device backends `--device-backend NAME` knows, by name.

Adding a device kind is one backend file, one test file and one line here (see
docs/driver-authors.md). Entries are `package.module:ClassName` strings, imported only
when chosen, so a backend's own dependencies cost nothing to the others. A backend
outside this list can still be named as `--device-backend package.module:ClassName`.
"""

from __future__ import annotations

BACKENDS: dict[str, str] = {
    "fake": "driver.devices.backend:FakeBackend",
    "sysfs": "driver.kinds.sysfs:SysfsBackend",
    "fpga": "driver.kinds.fpga:FpgaBackend",
}


def backend_spec(value: str) -> str:
    """The `package.module:ClassName` of a registered name; other values unchanged."""
    return BACKENDS.get(value, value)
