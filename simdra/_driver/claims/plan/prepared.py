"""What a claim needs on this node (pure): units, CDI spec, the kubelet's answer.

`plan_prepare` is a deterministic function of the allocation and the inventory, so
planning the same claim twice gives byte-identical specs and the same answer. Nothing
here touches files; the preparer acts on the plan.

A unit records what its device consumes of its pool's shared counter sets (`pool_counters`):
a partition and its whole device both draw on the counter sets of one physical device,
so that the ledger can refuse a partition while the whole device (or too many siblings)
is in use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from simdra._driver.claims.plan.allocation import (
    AllocatedDevice,
    ClaimAllocation,
    UnitKey,
    ambiguous_device_names,
    check_allocation,
    check_shares_allocated_once,
    group_results,
)
from simdra._driver.claims.plan.cdi import (
    CdiError,
    capacity_key,
    cdi_kind,
    copy_json,
    encode_spec,
    merge_edits,
    qualified_name,
    render_env,
    render_spec,
    spec_file_name,
    unit_id,
)
from simdra._driver.claims.plan.config import (
    ClaimRules,
    ConfigEntry,
    Resolved,
    decode_entries,
    resolve_all,
)
from simdra._driver.claims.plan.metadata import (
    RequestMetadata,
    group_by_request,
    metadata_mounts,
)
from simdra._driver.claims.types import ClaimError, ClaimRef, PreparedDevice, PrepareResult
from simdra._driver.core.quantity import QuantityError, ceil_int, parse_quantity, quantity_text
from simdra._driver.devices.config_handler import ConfigError, ConfigTarget
from simdra._driver.devices.model import Device, Inventory, Pool

Amounts = Mapping[str, Fraction]
# Where the inventory is read from, at each use (the live view's, for the plugin).
InventoryProvider = Callable[[], Inventory]


@dataclass(frozen=True)
class PreparedUnit:
    """One prepared (pool, device, shareID): what a container gets for it.

    Besides what the answer and the CDI spec need, a unit keeps what the node-side
    accounting and reporting need later from disk alone (ledger rebuild, `simdra usage`,
    claim status): the device's capacity, attributes and counter consumption as planned.
    """

    pool: str
    device: str
    share_id: str | None
    requests: tuple[str, ...]  # as allocated, `req` or `req/sub`
    exclusive: bool  # the device does not allow multiple allocations
    admin_access: bool
    consumed_capacity: Amounts
    device_capacity: Amounts  # the device's total, as planned
    cdi_name: str
    cdi_id: str
    env: tuple[str, ...]
    device_type: str = "device"  # the `type` attribute
    attributes: Mapping[str, Any] = field(default_factory=dict)  # published v1 JSON form
    consumes_counters: Mapping[str, Amounts] = field(default_factory=dict)  # set -> counter
    counter_totals: Mapping[str, Amounts] = field(default_factory=dict)  # of those sets
    config: Mapping[str, Any] = field(default_factory=dict)  # effective opaque config
    # Counter set -> the compatibility groups of the device's consumption of it (1.37).
    counter_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def key(self) -> UnitKey:
        """The identity of this unit on the node."""
        return (self.pool, self.device, self.share_id)

    @property
    def label(self) -> str:
        """How messages name this unit: `device <pool>/<device>[ share <id>]`."""
        share = f" share {self.share_id}" if self.share_id else ""
        return f"device {self.pool}/{self.device}{share}"

    @property
    def granted(self) -> dict[str, Fraction]:
        """What the unit holds of each capacity: a share its consumedCapacity, an
        exclusive device all of it."""
        return dict(self.device_capacity if self.exclusive else self.consumed_capacity)

    @property
    def request_names(self) -> tuple[str, ...]:
        """Main request names for the kubelet (`req/sub` -> `req`), without repeats."""
        return tuple(dict.fromkeys(r.split("/", 1)[0] for r in self.requests))

    def attribute(self, name: str) -> Any:
        """The value of attribute `name` (whatever member is set), or None."""
        entry = self.attributes.get(name)
        return next(iter(entry.values())) if isinstance(entry, dict) and entry else None

    def answer(self, metadata_ids: Mapping[str, str] | None = None) -> PreparedDevice:
        """This unit as one device of the kubelet's prepare answer, with the device
        metadata CDI id of each of its requests (request -> id) where there is one."""
        ids = metadata_ids or {}
        extra = [ids[r] for r in self.request_names if r in ids]
        return PreparedDevice(
            request_names=self.request_names,
            pool_name=self.pool,
            device_name=self.device,
            cdi_device_ids=(self.cdi_id, *extra),
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
    # Device metadata (simdra._driver.claims.plan.metadata): where its files are (None: off)
    # and the pod's name for a claim made from a template.
    metadata_root: str | None = None
    pod_claim_name: str | None = None
    # The spec mounts each request's directory (False: its file, in claims prepared
    # before directory mounts; see simdra._driver.claims.plan.metadata).
    metadata_dir_mount: bool = True

    def spec_bytes(self) -> bytes:
        """The exact content of this claim's CDI spec file."""
        return encode_spec(self.cdi_spec)

    def metadata_devices(self, driver_name: str) -> dict[str, Mapping[str, Any]]:
        """CDI device name -> container edits of the devices that mount this claim's
        device metadata, as the plugin makes them (empty when the feature is off)."""
        return dict(self.metadata_mounts(driver_name).values())

    def metadata_mounts(self, driver_name: str) -> dict[str, tuple[str, dict[str, Any]]]:
        """Base request -> (CDI device name, container edits) of the device that mounts
        the request's device metadata (empty when the feature is off)."""
        if self.metadata_root is None:
            return {}  # off: nothing of the feature's is computed, on any claim's path
        return metadata_mounts(self.metadata(driver_name), self.metadata_root, driver_name,
                               self.claim.name, self.pod_claim_name, self.claim.uid,
                               dir_mount=self.metadata_dir_mount)

    def metadata(self, driver_name: str) -> tuple[RequestMetadata, ...]:
        """The device metadata of each request (empty when the feature is off)."""
        if self.metadata_root is None:
            return ()
        return group_by_request(
            ((request, u.pool, u.device, dict(u.attributes))
             for u in self.units for request in u.requests), driver_name)


def plan_prepare(
    allocation: ClaimAllocation,
    inventory: Inventory,
    driver_name: str,
    rules: ClaimRules | None = None,
    metadata_root: str | None = None,
) -> PreparedClaim:
    """Compute what preparing `allocation` means on a node with `inventory`, with the
    config kinds and env attributes of its device kinds (`rules`); with `metadata_root`,
    each request's device metadata file is mounted through the spec as well.

    Raises ClaimError (naming claim, request, pool and device, or the config field) when
    a name breaks the API server's rules, the allocation does not fit the inventory or
    its opaque config is invalid.
    """
    where, rules = allocation.label, rules or ClaimRules()
    check_allocation(allocation)  # names reach file names, CDI names and env values
    if not allocation.results:
        raise ClaimError(f"{where}: no devices are allocated by driver {driver_name}")
    entries = _decode_config(allocation, rules, where)
    groups = group_results(allocation.results)
    check_shares_allocated_once(groups, where)
    ambiguous = ambiguous_device_names(groups)
    kind = _kind(driver_name, where)
    drafts = [
        _draft(allocation, results, inventory, kind, qualify_pool=results[0].device in ambiguous)
        for results in groups.values()
    ]
    configs = _resolve_config(entries, [unit for unit, _ in drafts], where)
    planned = [
        _finish(allocation, unit, device, config, rules)
        for (unit, device), config in zip(drafts, configs, strict=True)
    ]
    _check_unique_ids(planned, where)
    units = tuple(unit for unit, _ in planned)
    prepared = PreparedClaim(allocation.ref, units, "", {}, PrepareResult(),
                             metadata_root, allocation.pod_claim_name)
    return _with_spec(prepared, allocation, planned, kind, driver_name)


def _with_spec(
    prepared: PreparedClaim,
    allocation: ClaimAllocation,
    planned: list[tuple[PreparedUnit, dict[str, Any]]],
    kind: str,
    driver_name: str,
) -> PreparedClaim:
    """The claim with its CDI spec (the units' edits and the metadata mounts) and the
    kubelet's answer."""
    try:
        mounts = prepared.metadata_mounts(driver_name)
        spec = render_spec(kind, [(unit.cdi_name, edits) for unit, edits in planned]
                           + [(name, edits) for name, edits in mounts.values()])
        file_name = spec_file_name(driver_name, allocation.uid)
        extra = {r: qualified_name(kind, name) for r, (name, _) in mounts.items()}
    except ValueError as exc:  # CdiError, or a name that is no safe path component
        raise ClaimError(f"{allocation.label}: CDI spec: {exc}") from None
    result = PrepareResult(devices=tuple(u.answer(extra) for u in prepared.units))
    return replace(prepared, cdi_file=file_name, cdi_spec=spec, result=result)


def _kind(driver_name: str, where: str) -> str:
    try:
        return cdi_kind(driver_name)
    except CdiError as exc:
        raise ClaimError(f"{where}: {exc}") from None


def _decode_config(
    allocation: ClaimAllocation, rules: ClaimRules, where: str
) -> list[ConfigEntry]:
    try:
        return decode_entries(allocation.config, rules.config_handlers)
    except ConfigError as exc:
        raise ClaimError(f"{where}: invalid opaque config: {exc}") from None


def _resolve_config(
    entries: list[ConfigEntry], units: list[PreparedUnit], where: str
) -> list[Resolved | None]:
    targets = [ConfigTarget(u.requests, u.device_type, u.label, u.granted) for u in units]
    try:
        return resolve_all(entries, targets)
    except ConfigError as exc:
        raise ClaimError(f"{where}: invalid opaque config: {exc}") from None


def _draft(
    allocation: ClaimAllocation,
    results: list[AllocatedDevice],
    inventory: Inventory,
    kind: str,
    *,
    qualify_pool: bool,
) -> tuple[PreparedUnit, Device]:
    """The unit for `results` (one key), still without config and env."""
    first = results[0]
    where = f"{allocation.label}: request {first.request}: pool {first.pool} device {first.device}"
    pool, device = _inventory_device(inventory, first, where)
    capacity = _check_share(device, first, where)
    consumes, totals = pool_counters(pool, device, where)
    name = _cdi_name(allocation.uid, first, qualify_pool=qualify_pool)
    try:
        cdi_id = qualified_name(kind, name)
    except CdiError as exc:
        raise ClaimError(f"{where}: {exc}") from None
    device_type = device.attribute("type")
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
        device_type=str(device_type) if device_type is not None else "device",
        attributes=copy_json(dict(device.spec.get("attributes") or {})),
        consumes_counters=consumes,
        counter_totals=totals,
        counter_groups=counter_groups(device),
    )
    return unit, device


def _finish(
    allocation: ClaimAllocation,
    unit: PreparedUnit,
    device: Device,
    config: Resolved | None,
    rules: ClaimRules,
) -> tuple[PreparedUnit, dict[str, Any]]:
    """The unit with its config and env, and its CDI container edits."""
    where = f"{allocation.label}: request {unit.requests[0]}: pool {unit.pool} device {unit.device}"
    unit = replace(unit, config=config.to_json() if config is not None else {})
    try:
        values = _env_values(allocation, unit, config, rules)
        unit = replace(unit, env=render_env(unit.cdi_name, values))
        edits = merge_edits([device.container_edits, {"env": list(unit.env)}])
    except (CdiError, QuantityError) as exc:
        raise ClaimError(f"{where}: container edits: {exc}") from None
    return unit, edits


def _inventory_device(
    inventory: Inventory, result: AllocatedDevice, where: str
) -> tuple[Pool, Device]:
    pool = inventory.pool(result.pool)
    if pool is None:
        raise ClaimError(f"{where}: pool {result.pool} is not on this node")
    device = pool.device(result.device)
    if device is None:
        raise ClaimError(f"{where}: device {result.device} is not in pool {result.pool}")
    return pool, device


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


def _env_values(
    allocation: ClaimAllocation, unit: PreparedUnit, config: Resolved | None, rules: ClaimRules
) -> list[tuple[str, str]]:
    """(key, value) pairs of the scheme documented in `simdra._driver.claims.plan.cdi`."""
    values = [("NAME", unit.device), ("POOL", unit.pool), ("TYPE", unit.device_type)]
    for attribute, key in rules.env_attributes.items():
        value = unit.attribute(attribute)
        if value is not None:
            values.append((key, _env_text(value)))
    values += [
        ("CDI_DEVICE", unit.cdi_id),
        ("CLAIM", f"{allocation.namespace}/{allocation.name}"),
        ("CLAIM_UID", allocation.uid),
        ("REQUEST", ",".join(unit.requests)),
    ]
    if unit.share_id is not None:
        values.append(("SHARE_ID", unit.share_id))
    if unit.admin_access:  # reserves nothing, so it is told no capacity
        values.append(("ADMIN_ACCESS", "true"))
    else:
        for name, amount in sorted(unit.granted.items()):
            values.append((capacity_key(name), quantity_text(amount)))
            values.append((f"{capacity_key(name)}_VALUE", str(ceil_int(amount))))
    if unit.attribute("partition") is True:
        values.append(("PARTITION", "true"))
    return values + (config.env() if config is not None else [])


def _env_text(value: Any) -> str:
    # Attribute values as a shell would compare them: true/false, not Python's True; a
    # list attribute (DRAListTypeAttributes) comma-separated in its order, "2,3".
    if isinstance(value, list):
        return ",".join(_env_text(item) for item in value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _check_unique_ids(planned: list[tuple[PreparedUnit, dict[str, Any]]], where: str) -> None:
    # Names are hashes; a collision inside one claim would make two devices' variables
    # overwrite each other, so it is refused rather than hoped away.
    ids: dict[str, str] = {}
    for unit, _ in planned:
        other = ids.setdefault(unit_id(unit.cdi_name), unit.cdi_name)
        if other != unit.cdi_name:
            raise ClaimError(
                f"{where}: CDI devices {other} and {unit.cdi_name} hash to the same env id"
            )


# --- the counters a device consumes -------------------------------------------------


def pool_counters(
    pool: Pool, device: Device, where: str
) -> tuple[dict[str, dict[str, Fraction]], dict[str, dict[str, Fraction]]]:
    """What the device consumes of its pool's counter sets, and those sets' totals."""
    try:
        sets = {str(s["name"]): s for s in pool.shared_counters}
        consumes: dict[str, dict[str, Fraction]] = {}
        totals: dict[str, dict[str, Fraction]] = {}
        for entry in device.spec.get("consumesCounters") or []:
            name = str(entry["counterSet"])
            if name not in sets:
                raise ClaimError(
                    f"{where}: the device consumes counter set {name}, "
                    f"which pool {pool.name} does not have"
                )
            totals[name] = counter_amounts(sets[name]["counters"])
            wanted = counter_amounts(entry["counters"])
            unknown = sorted(set(wanted) - set(totals[name]))
            if unknown:
                raise ClaimError(f"{where}: counter set {name} has no counters {unknown}")
            into = consumes.setdefault(name, {})
            for counter, amount in wanted.items():
                into[counter] = into.get(counter, Fraction(0)) + amount
        return consumes, totals
    except (KeyError, TypeError, AttributeError, QuantityError) as exc:
        raise ClaimError(f"{where}: malformed counters in the inventory: {exc!r}") from None


def device_counters(inventory: Inventory, pool_name: str, device_name: str) -> dict[
    str, dict[str, Fraction]
]:
    """What a device of the inventory consumes of its pool's counter sets ({} when the
    device is not there or its counters are malformed)."""
    pool = inventory.pool(pool_name)
    device = pool.device(device_name) if pool is not None else None
    if pool is None or device is None:
        return {}
    try:
        return pool_counters(pool, device, f"pool {pool_name} device {device_name}")[0]
    except ClaimError:
        return {}


def counter_groups(device: Device) -> dict[str, tuple[str, ...]]:
    """Counter set -> the compatibility groups the device declares for its consumption of
    it (KEP-5963; only sets with groups are listed)."""
    groups: dict[str, tuple[str, ...]] = {}
    for entry in device.spec.get("consumesCounters") or []:
        named = entry.get("compatibilityGroups") if isinstance(entry, dict) else None
        if named:
            groups[str(entry.get("counterSet"))] = tuple(str(g) for g in named)
    return groups


def counter_amounts(counters: Any) -> dict[str, Fraction]:
    """A counters map of the API (`{name: {value: quantity}}`) as exact amounts."""
    return {str(name): parse_quantity(c["value"]) for name, c in counters.items()}
