"""crypto_driver: a DRA driver for simulated crypto accelerators, built on simdra.

Each accelerator `crypto-<i>` serves 64 `sessions` that many claims share; a claim
configures its share with a `CryptoConfig` (crypto.example.com/v1alpha1). Run it as
`crypto-dra-plugin run --driver-name crypto.example.com --device-profile crypto`, or
register the kind with any simdra: `simdra run --kind crypto_driver:CryptoKind`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import simdra
from simdra import ConfigTarget, Device, DeviceKind, FakeProfile, FieldReader, ProfileContext

API_VERSION = "crypto.example.com/v1alpha1"
ALGORITHMS = ("aes-gcm", "chacha20-poly1305", "sha256")
MODEL = "SimCrypto C1"
SESSIONS = 64  # concurrent sessions of one accelerator
MAX_QUEUE_DEPTH = 1024
QUEUE_PER_SESSION = 16  # queue entries one session may keep in flight


@dataclass(frozen=True)
class CryptoConfig:
    """kind CryptoConfig: every field optional, so a claim can override a class."""

    algorithm: str | None = None
    queue_depth: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The canonical JSON form, recorded with the prepared claim."""
        body = {"algorithm": self.algorithm, "queueDepth": self.queue_depth}
        return {"apiVersion": API_VERSION, "kind": "CryptoConfig",
                **{key: value for key, value in body.items() if value is not None}}


class CryptoConfigHandler:
    """Decodes, checks and applies CryptoConfig for devices of type `crypto`."""

    api_version = API_VERSION
    kind = "CryptoConfig"
    device_type = "crypto"

    def decode(self, fields: FieldReader) -> CryptoConfig:
        """Unknown fields and wrong JSON types are reported by the reader."""
        return CryptoConfig(algorithm=fields.string("algorithm"),
                            queue_depth=fields.integer("queueDepth"))

    def problems(self, config: CryptoConfig, path: str) -> list[str]:
        """A known algorithm and a queue depth in range."""
        found = []
        if config.algorithm is not None and config.algorithm not in ALGORITHMS:
            found.append(f"{path}.algorithm: {config.algorithm!r} is not one of "
                         f"{', '.join(ALGORITHMS)}")
        depth = config.queue_depth
        if depth is not None and not 1 <= depth <= MAX_QUEUE_DEPTH:
            found.append(f"{path}.queueDepth: {depth} is not in 1-{MAX_QUEUE_DEPTH}")
        return found

    def device_problems(self, config: CryptoConfig, target: ConfigTarget,
                        origin: Mapping[str, str]) -> list[str]:
        """A queue no deeper than the sessions the share holds can keep in flight."""
        held = target.granted.get("sessions")
        if config.queue_depth is None or held is None:
            return []
        limit = int(held) * QUEUE_PER_SESSION
        if config.queue_depth <= limit:
            return []
        return [(f"{origin['queue_depth']}.queueDepth: {config.queue_depth} is more than the "
                 f"{limit} that the {held} sessions of {target.label} keep in flight")]

    def env(self, config: CryptoConfig) -> list[tuple[str, str]]:
        """CRYPTO_ALGORITHM and CRYPTO_QUEUE_DEPTH, as set."""
        env = [("CRYPTO_ALGORITHM", config.algorithm)] if config.algorithm else []
        if config.queue_depth is not None:
            env.append(("CRYPTO_QUEUE_DEPTH", str(config.queue_depth)))
        return env


def crypto_device(context: ProfileContext, index: int) -> Device:
    """Accelerator `index`: 64 sessions that claims share, asked for one at a time."""
    name = f"crypto-{index}"
    serial = simdra.stable_uuid(context.driver_name, context.node_name, name)
    return Device(spec={
        "name": name,
        "allowMultipleAllocations": True,
        "attributes": {
            "type": {"string": "crypto"},
            "model": {"string": MODEL},
            "generation": {"int": 3},
            "algorithms": {"string": ",".join(ALGORITHMS)},
            "serial": {"string": serial},
        },
        "capacity": {"sessions": {"value": str(SESSIONS), "requestPolicy": {
            "default": "1", "validRange": {"min": "1", "step": "1"}}}},
    })


class CryptoKind(DeviceKind):
    """Simulated crypto accelerators whose sessions many claims share."""

    name = "crypto"
    env_attributes: ClassVar[Mapping[str, str]] = {
        "model": "MODEL", "generation": "GENERATION", "algorithms": "ALGORITHMS",
        "serial": "SERIAL"}
    config_handlers = (CryptoConfigHandler(),)
    profiles = (FakeProfile("crypto", build=crypto_device,
                            description="accelerators of 64 shared sessions"),)


def main(argv: Sequence[str] | None = None) -> int:
    """`crypto-dra-plugin`: the `simdra` command line with CryptoKind registered."""
    return simdra.main(argv, kinds=(CryptoKind,))
