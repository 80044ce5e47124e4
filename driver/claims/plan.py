"""What a claim needs on this node (pure): units, CDI spec, the kubelet's answer.

`plan_prepare` is a deterministic function of the allocation and the inventory, so
planning the same claim twice gives byte-identical specs and the same answer. Nothing
here touches files; the preparer acts on the plan.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from driver.claims.allocation import AllocatedDevice, ClaimAllocation
from driver.claims.cdi import (
    CdiError,
    cdi_kind,
    encode_spec,
    env_entry,
    env_token,
    merge_edits,
    qualified_name,
    render_spec,
    spec_file_name,
)
from driver.claims.errors import ClaimError, quantity_text
from driver.claims.types import ClaimRef, PreparedDevice, PrepareResult
from driver.devices.model import Device, Inventory
from driver.devices.quantity import QuantityError, ceil_int

ENV_PREFIX = "SIMDRA_"

UnitKey = tuple[str, str, str | None]  # (pool, device, shareID)


@dataclass(frozen=True)
class PreparedUnit:
    """One prepared (pool, device, shareID): what a container gets for it."""

    pool: str
    device: str
    share_id: str | None
    requests: tuple[str, ...]  # as allocated, `req` or `req/sub`
    exclusive: bool  # the device does not allow multiple allocations
    admin_access: bool
    consumed_capacity: Mapping[str, Fraction]
    device_capacity: Mapping[str, Fraction]  # the device's total, as planned
    cdi_name: str
    cdi_id: str
    env: tuple[str, ...]

    @property
    def key(self) -> UnitKey:
        """The identity of this unit on the node."""
        return (self.pool, self.device, self.share_id)

    @property
    def request_names(self) -> tuple[str, ...]:
        """Main request names for the kubelet (`req/sub` -> `req`), without repeats."""
        return tuple(dict.fromkeys(r.split("/", 1)[0] for r in self.requests))

    def answer(self) -> PreparedDevice:
        """This unit as one device of the kubelet's prepare answer."""
        return PreparedDevice(
            request_names=self.request_names,
            pool_name=self.pool,
            device_name=self.device,
            cdi_device_ids=(self.cdi_id,),
            share_id=self.share_id,
        )


@dataclass(frozen=True)
class PreparedClaim:
    """Everything prepare does for one claim, and the answer it gives."""

    claim: ClaimRef
    units: tuple[PreparedUnit, ...]
    cdi_file: str
    cdi_spec: Mapping[str, Any]
    result: PrepareResult

    def spec_bytes(self) -> bytes:
        """The exact content of this claim's CDI spec file."""
        return encode_spec(self.cdi_spec)


def plan_prepare(
    allocation: ClaimAllocation, inventory: Inventory, driver_name: str
) -> PreparedClaim:
    """Compute what preparing `allocation` means on a node with `inventory`.

    Raises ClaimError (naming claim, request, pool and device) when the allocation does
    not fit the inventory.
    """
    where = allocation.label
    if not allocation.results:
        raise ClaimError(f"{where}: no devices are allocated by driver {driver_name}")
    groups = _group_results(allocation.results)
    ambiguous = _ambiguous_device_names(groups)
    kind = _kind(driver_name, where)
    planned = [
        _unit(allocation, results, inventory, kind, qualify_pool=results[0].device in ambiguous)
        for results in groups.values()
    ]
    units = tuple(unit for unit, _ in planned)
    try:
        spec = render_spec(kind, [(unit.cdi_name, edits) for unit, edits in planned])
        file_name = spec_file_name(driver_name, allocation.uid)
    except CdiError as exc:
        raise ClaimError(f"{where}: CDI spec: {exc}") from None
    result = PrepareResult(devices=tuple(u.answer() for u in units))
    return PreparedClaim(allocation.ref, units, file_name, spec, result)


def _kind(driver_name: str, where: str) -> str:
    try:
        return cdi_kind(driver_name)
    except CdiError as exc:
        raise ClaimError(f"{where}: {exc}") from None


def _group_results(
    results: tuple[AllocatedDevice, ...],
) -> dict[UnitKey, list[AllocatedDevice]]:
    # Results naming the same (pool, device, shareID) are one unit serving several
    # requests (possible for admin access); the answer lists all their request names.
    groups: dict[UnitKey, list[AllocatedDevice]] = {}
    for result in results:
        groups.setdefault((result.pool, result.device, result.share_id), []).append(result)
    return groups


def _ambiguous_device_names(groups: Mapping[UnitKey, list[AllocatedDevice]]) -> set[str]:
    # Device names are unique only within a pool; when one claim holds equally named
    # devices of several pools, their CDI names must carry the pool.
    pools_by_device: dict[str, set[str]] = {}
    for pool, device, _ in groups:
        pools_by_device.setdefault(device, set()).add(pool)
    return {device for device, pools in pools_by_device.items() if len(pools) > 1}


def _unit(
    allocation: ClaimAllocation,
    results: list[AllocatedDevice],
    inventory: Inventory,
    kind: str,
    *,
    qualify_pool: bool,
) -> tuple[PreparedUnit, dict[str, Any]]:
    """The unit for `results` (one key) and its CDI container edits."""
    first = results[0]
    where = f"{allocation.label}: request {first.request}: pool {first.pool} device {first.device}"
    device = _inventory_device(inventory, first, where)
    capacity = _check_share(device, first, where)
    name = _cdi_name(allocation.uid, first, qualify_pool=qualify_pool)
    try:
        cdi_id = qualified_name(kind, name)
    except CdiError as exc:
        raise ClaimError(f"{where}: {exc}") from None
    unit = PreparedUnit(
        pool=first.pool,
        device=first.device,
        share_id=first.share_id,
        requests=tuple(dict.fromkeys(r.request for r in results)),
        exclusive=not device.allows_multiple_allocations,
        admin_access=all(r.admin_access for r in results),
        consumed_capacity=dict(first.consumed_capacity),
        device_capacity=capacity,
        cdi_name=name,
        cdi_id=cdi_id,
        env=(),
    )
    try:
        unit = replace(unit, env=_env(allocation, unit, device))
        edits = merge_edits([device.container_edits, {"env": list(unit.env)}])
    except (CdiError, QuantityError) as exc:
        raise ClaimError(f"{where}: container edits: {exc}") from None
    return unit, edits


def _inventory_device(inventory: Inventory, result: AllocatedDevice, where: str) -> Device:
    if inventory.pool(result.pool) is None:
        raise ClaimError(f"{where}: pool {result.pool} is not on this node")
    device = inventory.device(result.pool, result.device)
    if device is None:
        raise ClaimError(f"{where}: device {result.device} is not in pool {result.pool}")
    return device


def _check_share(device: Device, result: AllocatedDevice, where: str) -> dict[str, Fraction]:
    """The device capacity, after checking the result matches the device's sharing mode."""
    shared = device.allows_multiple_allocations
    if result.share_id is not None and not shared:
        raise ClaimError(
            f"{where}: allocated as share {result.share_id}, but the device does not allow "
            "multiple allocations"
        )
    if result.share_id is None and shared:
        raise ClaimError(f"{where}: the device allows multiple allocations but has no shareID")
    if result.consumed_capacity and not shared:
        raise ClaimError(f"{where}: consumedCapacity is set for an exclusive device")
    capacity = device.capacity()
    unknown = sorted(set(result.consumed_capacity) - set(capacity))
    if unknown:
        raise ClaimError(
            f"{where}: consumedCapacity names {unknown}, the device has no such capacity"
        )
    return capacity


def _cdi_name(claim_uid: str, result: AllocatedDevice, *, qualify_pool: bool) -> str:
    # The claim UID makes names unique across claims (runtimes may cache specs); the
    # full shareID makes two shares of one device in one claim distinct. `_` occurs in
    # neither pool names nor device names, so the pool-qualified form is unambiguous.
    parts = [claim_uid]
    parts.append(
        f"{result.pool.replace('/', '_')}_{result.device}" if qualify_pool else result.device
    )
    if result.share_id is not None:
        parts.append(result.share_id)
    return "-".join(parts)


def _env(allocation: ClaimAllocation, unit: PreparedUnit, device: Device) -> tuple[str, ...]:
    """Env vars telling the workload what it got, all under one per-unit prefix.

    The prefix carries the device name plus 8 hex digits of a hash of the CDI device
    name, so vars of two CDI devices given to one container do not overwrite each other.
    """
    digest = hashlib.sha256(unit.cdi_name.encode()).hexdigest()[:8].upper()
    prefix = f"{ENV_PREFIX}{env_token(unit.device)}_{digest}_"
    device_type = device.attribute("type")
    values: list[tuple[str, str]] = [
        ("DEVICE", unit.device),
        ("POOL", unit.pool),
        ("REQUEST", ",".join(unit.requests)),
        ("CLAIM", f"{allocation.namespace}/{allocation.name}"),
        ("CLAIM_UID", allocation.uid),
        ("TYPE", str(device_type) if device_type is not None else "device"),
    ]
    if unit.share_id is not None:
        values.append(("SHARE_ID", unit.share_id))
    for name, amount in sorted(unit.consumed_capacity.items()):
        token = f"CAPACITY_{env_token(name)}"
        values.append((token, quantity_text(amount)))
        values.append((f"{token}_VALUE", str(ceil_int(amount))))
    if unit.admin_access:
        values.append(("ADMIN_ACCESS", "true"))
    return tuple(env_entry(prefix + key, value) for key, value in values)
