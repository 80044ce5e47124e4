"""Device kind modules written to a directory, as a driver author's package would be
(out of the tree, found on the Python path): for the tests of kind registration, the
generated DeviceClasses, the harness and `simdra demo`."""

from __future__ import annotations

import uuid
from pathlib import Path

# A whole kind: shared devices with a consumable capacity, an env attribute, a config
# kind and an extra DeviceClass condition (DRIVER: the driver name).
CRYPTO = '''
"""Simulated crypto accelerators, an out-of-tree kind."""

from simdra import Device, DeviceKind, FakeProfile


def crypto_device(context, index):
    return Device(spec={
        "name": f"crypto-{index}",
        "allowMultipleAllocations": True,
        "attributes": {"type": {"string": "crypto"}, "model": {"string": "Crypto C1"}},
        "capacity": {"sessions": {"value": "8", "requestPolicy": {
            "default": "1", "validRange": {"min": "1", "step": "1"}}}},
    })


class CryptoConfigHandler:
    api_version = "crypto.example.com/v1"
    kind = "CryptoConfig"
    device_type = "crypto"

    def decode(self, fields):
        return None

    def problems(self, config, path):
        return []

    def device_problems(self, config, target, origin):
        return []

    def env(self, config):
        return []


class CryptoKind(DeviceKind):
    """Simulated crypto accelerators whose sessions many claims share."""

    name = "crypto"
    env_attributes = {"model": "MODEL"}
    config_handlers = (CryptoConfigHandler(),)
    profiles = (FakeProfile("crypto", build=crypto_device, description="shared accelerators"),)
    device_class_condition = 'device.attributes["DRIVER"].model != "retired"'
'''


def write_module(directory: Path, source: str) -> str:
    """Write `source` as a module with a name no other test uses (imported modules stay
    in sys.modules) into `directory`; its module name."""
    name = f"kinds_{uuid.uuid4().hex[:12]}"
    (directory / f"{name}.py").write_text(source)
    return name
