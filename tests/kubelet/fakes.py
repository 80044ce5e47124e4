"""Test doubles for the kubelet layer: the claim preparer side and socket dirs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simdra._driver.claims.types import ClaimRef, PreparedDevice, PrepareResult, UnprepareResult
from simdra._driver.kubelet.sockets import dra_socket_path, registration_socket_path

DRIVER = "gpu.example.com"


@dataclass(frozen=True)
class Dirs:
    """A short temporary tree (AF_UNIX paths are limited to 107 usable bytes)."""

    root: str
    data: str
    registry: str

    @property
    def dra_socket(self) -> str:
        return dra_socket_path(self.data)

    @property
    def registration_socket(self) -> str:
        return registration_socket_path(self.registry, DRIVER)


def device(pool: str, name: str, *requests: str, share_id: str | None = None) -> PreparedDevice:
    """A prepared device whose CDI ID is derived from its name."""
    return PreparedDevice(
        request_names=tuple(requests),
        pool_name=pool,
        device_name=name,
        cdi_device_ids=(f"example.com/gpu={name}",),
        share_id=share_id,
    )


@dataclass
class FakePreparer:
    """The other side of the contract: answers from tables the test fills in."""

    devices: dict[str, tuple[PreparedDevice, ...]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    omit: set[str] = field(default_factory=set)
    extra_uids: set[str] = field(default_factory=set)
    fail_with: Exception | None = None
    calls: list[tuple[str, list[ClaimRef]]] = field(default_factory=list)
    on_call: Callable[[], Any] | None = None

    def _answer(self, step: str, claims: list[ClaimRef]) -> list[str]:
        self.calls.append((step, list(claims)))
        if self.on_call is not None:
            self.on_call()
        if self.fail_with is not None:
            raise self.fail_with
        return [c.uid for c in claims if c.uid not in self.omit] + sorted(self.extra_uids)

    def prepare(self, claims: list[ClaimRef]) -> dict[str, PrepareResult]:
        return {
            uid: PrepareResult(devices=self.devices.get(uid, ()), error=self.errors.get(uid, ""))
            for uid in self._answer("prepare", claims)
        }

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, UnprepareResult]:
        return {
            uid: UnprepareResult(error=self.errors.get(uid, ""))
            for uid in self._answer("unprepare", claims)
        }
