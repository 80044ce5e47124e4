"""The device backends `--device-backend NAME` knows, by name.

A device kind is a `DeviceKind` class (docs/driver-authors.md), registered with `--kind`
or `simdra.main(kinds=...)`; a backend is needed only to discover real hardware, and one
outside this list is named as `--device-backend package.module:ClassName`. Entries are
`package.module:ClassName` strings, imported only when chosen, so a backend's own
dependencies cost nothing to the others.
"""

from __future__ import annotations

BACKENDS: dict[str, str] = {
    "fake": "simdra._driver.devices.backend:FakeBackend",
    "sysfs": "simdra._driver.kinds.sysfs:SysfsBackend",
    "fpga": "simdra._driver.kinds.fpga:FpgaBackend",
}


def backend_spec(value: str) -> str:
    """The `package.module:ClassName` of a registered name; other values unchanged."""
    return BACKENDS.get(value, value)
