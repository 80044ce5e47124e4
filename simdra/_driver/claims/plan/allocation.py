"""Read a ResourceClaim (resource.k8s.io/v1 JSON) into what this driver must prepare.

Pure: a dict in, a frozen `ClaimAllocation` out. Only `metadata` identity and
`status.allocation.devices` are read; every other field (spec, reservedFor, status.devices,
tolerations, binding conditions, ...) is ignored, so newer API fields never break us.
Results and opaque config of other drivers are dropped here: they are not ours to act on.

The names in it are checked against the API server's rules (`check_ref`,
`check_allocation`): they become parts of file names (the claim UID), CDI device names
and env values (pool, device, request, namespace, name), so a value the API server would
never accept (a NUL in a request name, a newline in a namespace) is refused as that
claim's error before it reaches a file or a CDI spec. The rules are the ones the
ResourceSlice validation uses (`simdra._driver.core.validation.names`); this module only
says which field follows which. Its results are grouped into units, one per (pool,
device, shareID) (`group_results`).

`allocated_devices` reads the same results leniently, for the questions asked of a claim
that is not being prepared: does it still name the devices of its record?
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Any

from simdra._driver.claims.plan.metadata import POD_CLAIM_ANNOTATION
from simdra._driver.claims.types import ClaimError, ClaimRef, claim_label
from simdra._driver.core.quantity import QuantityError, parse_quantity
from simdra._driver.core.textlimits import clip, one_line
from simdra._driver.core.validation.errors import FieldError
from simdra._driver.core.validation.names import (
    dns_label_errors,
    dns_subdomain_errors,
    pool_name_errors,
    qualified_name_errors,
    uuid_errors,
)

_RESULTS = "status.allocation.devices.results"
_CONFIG = "status.allocation.devices.config"
UnitKey = tuple[str, str, str | None]  # (pool, device, shareID)
Rule = Callable[[Any, str], list[FieldError]]


@dataclass(frozen=True)
class AllocatedDevice:
    """One allocation result of this driver: a whole device, or one share of it."""

    request: str  # as allocated: `req` or `req/sub`
    pool: str
    device: str
    share_id: str | None
    consumed_capacity: Mapping[str, Fraction]
    admin_access: bool

    @property
    def main_request(self) -> str:
        """The request name the kubelet matches containers against (`req/sub` -> `req`)."""
        return self.request.split("/", 1)[0]


@dataclass(frozen=True)
class OpaqueConfig:
    """One opaque configuration entry for this driver, from the class or the claim."""

    source: str  # FromClass or FromClaim
    requests: tuple[str, ...]  # empty: all requests
    driver: str
    parameters: Any  # the raw JSON; config decoding checks it
    path: str = ""  # where the entry sits, e.g. status.allocation.devices.config[1]

    def applies_to(self, request: str) -> bool:
        """True when this entry configures `request` (`req` also covers `req/sub`)."""
        if not self.requests:
            return True
        return request in self.requests or request.split("/", 1)[0] in self.requests


@dataclass(frozen=True)
class ClaimAllocation:
    """The allocated claim as far as this driver is concerned."""

    namespace: str
    name: str
    uid: str
    results: tuple[AllocatedDevice, ...]
    config: tuple[OpaqueConfig, ...]
    # The pod's name for a claim made from a template (pod.spec.resourceClaims[].name,
    # from the resource.kubernetes.io/pod-claim-name annotation); device metadata's path.
    pod_claim_name: str | None = None

    @property
    def ref(self) -> ClaimRef:
        """The claim's identity as the kubelet names it."""
        return ClaimRef(self.namespace, self.name, self.uid)

    @cached_property
    def label(self) -> str:
        """How error messages name this claim (made once: planning puts it into the
        context of every step's error, before it knows whether there is one)."""
        return claim_label(self.namespace, self.name, self.uid)

    def config_for(self, request: str) -> tuple[OpaqueConfig, ...]:
        """Entries for `request`, class entries first so that claim entries win when
        applied in order (common driver practice, not an API rule)."""
        matching = [c for c in self.config if c.applies_to(request)]
        return tuple(sorted(matching, key=lambda c: c.source != "FromClass"))


def parse_claim(raw: Any, driver_name: str, expected: ClaimRef | None = None) -> ClaimAllocation:
    """Parse a ResourceClaim JSON object, keeping only `driver_name`'s part.

    With `expected` (the kubelet's ClaimRef), a claim with another UID is refused: the
    claim was deleted and re-created under the same name ("got replaced").
    Raises ClaimError naming the claim, the field and the problem.
    """
    where = claim_label(expected.namespace, expected.name, expected.uid) if expected else "claim"
    if not isinstance(raw, dict):
        raise ClaimError(f"{where}: ResourceClaim is not a JSON object but {_kind(raw)}")
    metadata = _object(raw, "metadata", where, required=True)
    namespace = _string(metadata, "namespace", where, "metadata.namespace")
    name = _string(metadata, "name", where, "metadata.name")
    uid = _string(metadata, "uid", where, "metadata.uid")
    if expected is not None:
        _check_identity(expected, namespace, name, uid, where)  # then `where` names it
    else:
        where = claim_label(namespace, name, uid)
    devices = _allocated_devices(raw, where)
    return ClaimAllocation(
        namespace,
        name,
        uid,
        results=_our_results(devices, driver_name, where),
        config=_our_config(devices, driver_name, where),
        pod_claim_name=_pod_claim_name(metadata),
    )


def _pod_claim_name(metadata: Mapping[str, Any]) -> str | None:
    """The annotation as given (check_allocation judges it before any path uses it)."""
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        return None
    value = annotations.get(POD_CLAIM_ANNOTATION)
    return None if value is None else value if isinstance(value, str) else repr(value)


def _check_identity(expected: ClaimRef, namespace: str, name: str, uid: str,
                    where: str) -> None:
    if (namespace, name) != (expected.namespace, expected.name):
        raise ClaimError(
            f"{where}: the API server returned claim {one_line(namespace)}/{one_line(name)} instead"
        )
    if uid != expected.uid:
        raise ClaimError(
            f"{where}: field metadata.uid: the API server has uid {one_line(uid)}, "
            "so the claim got replaced (deleted and re-created); not preparing it"
        )


def _allocated_devices(raw: dict[str, Any], where: str) -> dict[str, Any]:
    status = _object(raw, "status", where, required=False)
    allocation = _object(status, "allocation", where, required=False, path="status.allocation")
    if not allocation:
        raise ClaimError(f"{where}: not allocated (status.allocation is not set)")
    return _object(allocation, "devices", where, required=False, path="status.allocation.devices")


def _our_results(
    devices: dict[str, Any], driver_name: str, where: str
) -> tuple[AllocatedDevice, ...]:
    results = []
    for i, entry in enumerate(_list(devices, "results", where, _RESULTS)):
        path = f"{_RESULTS}[{i}]"
        entry = _as_object(entry, where, path)
        if _string(entry, "driver", where, f"{path}.driver") == driver_name:
            results.append(_result(entry, path, where))
    return tuple(results)


def _our_config(devices: dict[str, Any], driver_name: str, where: str) -> tuple[OpaqueConfig, ...]:
    found = []
    for i, entry in enumerate(_list(devices, "config", where, _CONFIG)):
        parsed = _config(entry, f"{_CONFIG}[{i}]", where)
        if parsed is not None and parsed.driver == driver_name:
            found.append(parsed)
    return tuple(found)


def _result(entry: dict[str, Any], path: str, where: str) -> AllocatedDevice:
    share_id = entry.get("shareID")
    # API: shareID is a lowercase RFC 4122 UUID. Checked strictly because it becomes part
    # of CDI device names and env var names.
    if share_id is not None and uuid_errors(share_id, "shareID"):
        raise ClaimError(
            f"{where}: field {path}.shareID: {one_line(repr(share_id))} is not a lowercase UUID"
        )
    admin = entry.get("adminAccess")
    if admin is not None and not isinstance(admin, bool):
        raise ClaimError(
            f"{where}: field {path}.adminAccess: {one_line(repr(admin))} is not a boolean")
    return AllocatedDevice(
        request=_string(entry, "request", where, f"{path}.request"),
        pool=_string(entry, "pool", where, f"{path}.pool"),
        device=_string(entry, "device", where, f"{path}.device"),
        share_id=share_id,
        consumed_capacity=_consumed(entry, where, f"{path}.consumedCapacity"),
        admin_access=bool(admin),
    )


def _config(entry: Any, path: str, where: str) -> OpaqueConfig | None:
    entry = _as_object(entry, where, path)
    opaque = _object(entry, "opaque", where, required=False, path=f"{path}.opaque")
    if not opaque:
        return None  # a non-opaque config kind from a newer API: nothing for us
    requests = _list(entry, "requests", where, f"{path}.requests")
    if not all(isinstance(r, str) for r in requests):
        raise ClaimError(f"{where}: field {path}.requests: entries must be strings")
    source = entry.get("source", "")
    if not isinstance(source, str):
        raise ClaimError(f"{where}: field {path}.source: {one_line(repr(source))} is not a string")
    return OpaqueConfig(
        source=source,
        requests=tuple(requests),
        driver=_string(opaque, "driver", where, f"{path}.opaque.driver"),
        # Not checked here: config decoding reports a bad value with its field path.
        parameters=opaque.get("parameters"),
        path=path,
    )


def _consumed(entry: dict[str, Any], where: str, path: str) -> dict[str, Fraction]:
    # A negative amount would lower the total the capacity ledger adds up and let an
    # overbooking share through, so it is refused like any other malformed field.
    consumed = _quantities(entry, "consumedCapacity", where, path)
    for name, amount in consumed.items():
        if amount < 0:
            value = one_line(repr(entry["consumedCapacity"][name]))
            raise ClaimError(f"{where}: field {path}[{one_line(name)}]: {value} is negative")
    return consumed


def _quantities(entry: dict[str, Any], key: str, where: str, path: str) -> dict[str, Fraction]:
    raw = _object(entry, key, where, required=False, path=path)
    parsed: dict[str, Fraction] = {}
    for name, value in raw.items():
        try:
            parsed[name] = parse_quantity(value)
        except QuantityError as exc:
            raise ClaimError(f"{where}: field {path}[{one_line(name)}]: {one_line(exc)}") from None
    return parsed


def _object(
    parent: dict[str, Any], key: str, where: str, *, required: bool, path: str | None = None
) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        if required:
            raise ClaimError(f"{where}: field {path or key}: missing")
        return {}
    return _as_object(value, where, path or key)


def _as_object(value: Any, where: str, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ClaimError(f"{where}: field {path}: expected an object, got {_kind(value)}")
    return value


def _list(parent: dict[str, Any], key: str, where: str, path: str) -> list[Any]:
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ClaimError(f"{where}: field {path}: expected a list, got {_kind(value)}")
    return value


def _string(parent: dict[str, Any], key: str, where: str, path: str) -> str:
    value = parent.get(key)
    if not isinstance(value, str) or not value:
        shown = one_line(repr(value))
        problem = "missing" if value is None else f"expected a non-empty string, got {shown}"
        raise ClaimError(f"{where}: field {path}: {problem}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


# --- the names, by the API server's rules ------------------------------------------


def check_ref(ref: ClaimRef) -> None:
    """Raise ClaimError when the kubelet's namespace, name or UID breaks the API rules."""
    problems = _problems(
        [
            ("namespace", ref.namespace, dns_label_errors, "a DNS label"),
            ("name", ref.name, dns_subdomain_errors, "a DNS subdomain"),
            ("uid", ref.uid, uuid_errors, "a lowercase UUID"),
        ]
    )
    if problems:
        label = claim_label(ref.namespace, ref.name, ref.uid)
        raise ClaimError(f"{label}: refused: {'; '.join(problems)}")


def check_allocation(allocation: ClaimAllocation) -> None:
    """Raise ClaimError naming every result field of this driver that breaks the rules:
    request names (`req` or `req/sub`, DNS labels), pools (DNS subdomains joined by
    `/`), devices (DNS labels) and consumedCapacity names (qualified names)."""
    fields: list[tuple[str, Any, Rule, str]] = [
        ("metadata.namespace", allocation.namespace, dns_label_errors, "a DNS label"),
        ("metadata.name", allocation.name, dns_subdomain_errors, "a DNS subdomain"),
        ("metadata.uid", allocation.uid, uuid_errors, "a lowercase UUID"),
    ]
    if allocation.pod_claim_name is not None:  # a path part of its device metadata
        fields.append((f"metadata.annotations[{POD_CLAIM_ANNOTATION}]",
                       allocation.pod_claim_name, dns_label_errors, "a DNS label"))
    for i, result in enumerate(allocation.results):
        path = f"{_RESULTS}[{i}]"
        fields.append((f"{path}.request", result.request, _request_errors, "a request name"))
        fields.append((f"{path}.pool", result.pool, pool_name_errors, "a pool name"))
        fields.append((f"{path}.device", result.device, dns_label_errors, "a DNS label"))
        for name in result.consumed_capacity:
            fields.append(
                (f"{path}.consumedCapacity", name, qualified_name_errors, "a capacity name")
            )
    problems = _problems(fields)
    if problems:
        raise ClaimError(f"{allocation.label}: refused: {'; '.join(problems)}")


def _request_errors(value: Any, path: str) -> list[FieldError]:
    """`req` or `req/sub` (a subrequest of a prioritized list), each part a DNS label."""
    if not isinstance(value, str):
        return dns_label_errors(value, path)
    parts = value.split("/")
    if len(parts) > 2:
        return dns_label_errors(value, path)  # a '/' is never part of a DNS label
    return [e for part in parts for e in dns_label_errors(part, path)]


def _problems(fields: list[tuple[str, Any, Rule, str]]) -> list[str]:
    # The rule's own message repeats the value in full; a clipped value is shown instead.
    return [
        f"field {path}: {clip(repr(value))} is not {what}"
        for path, value, rule, what in fields
        if rule(value, path)
    ]


# --- units: the results grouped by (pool, device, shareID) -----------------------


def group_results(
    results: tuple[AllocatedDevice, ...],
) -> dict[UnitKey, list[AllocatedDevice]]:
    """Results naming the same (pool, device, shareID) are one unit serving several
    requests (possible for admin access); the answer lists all their request names."""
    groups: dict[UnitKey, list[AllocatedDevice]] = {}
    for result in results:
        groups.setdefault((result.pool, result.device, result.share_id), []).append(result)
    return groups


def check_shares_allocated_once(
    groups: Mapping[UnitKey, list[AllocatedDevice]], where: str
) -> None:
    """ClaimError for a shareID in two results: the scheduler draws a fresh one for
    every allocation of a multi-allocatable device, and one shareID twice would make
    their consumed capacity count once."""
    for (pool, device, share_id), results in groups.items():
        if share_id is not None and len(results) > 1:
            requests = ", ".join(r.request for r in results)
            raise ClaimError(
                f"{where}: device {pool}/{device}: shareID {share_id} appears in "
                f"{len(results)} allocation results (requests {requests}); each share is "
                "allocated once")


def ambiguous_device_names(groups: Mapping[UnitKey, list[AllocatedDevice]]) -> set[str]:
    """Device names held in several pools by the claim: names are unique only within a
    pool, so their CDI names must carry the pool."""
    pools_by_device: dict[str, set[str]] = {}
    for pool, device, _ in groups:
        pools_by_device.setdefault(device, set()).add(pool)
    return {device for device, pools in pools_by_device.items() if len(pools) > 1}


# --- the devices a claim names, read leniently ------------------------------------


def allocated_devices(allocation: Mapping[str, Any], driver: str) -> frozenset[UnitKey]:
    """(pool, device, shareID) of every allocation result of `driver`."""
    results = path_value(allocation, "devices", "results")
    found: set[UnitKey] = set()
    for result in results if isinstance(results, list) else ():
        if not isinstance(result, Mapping) or result.get("driver") != driver:
            continue
        pool, device, share = result.get("pool"), result.get("device"), result.get("shareID")
        if isinstance(pool, str) and isinstance(device, str):
            found.add((pool, device, share if isinstance(share, str) and share else None))
    return frozenset(found)


def allocated_now(raw: Any, ref: ClaimRef, driver: str) -> frozenset[UnitKey] | None:
    """The (pool, device, shareID)s `driver`'s results name in the claim as read, or
    None when the object read is not `ref` (another claim under its name, or one whose
    namespace, name or UID is not set)."""
    if _identity(raw) != ref:
        return None
    status = raw.get("status")
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    return allocated_devices(allocation if isinstance(allocation, Mapping) else {}, driver)


def _identity(raw: Any) -> ClaimRef | None:
    """The claim's namespace, name and UID as the API server gave them, if all are set."""
    meta = raw.get("metadata") if isinstance(raw, Mapping) else None
    if not isinstance(meta, Mapping):
        return None
    namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    if isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str):
        return ClaimRef(namespace, name, uid)
    return None


def devices_text(keys: Iterable[UnitKey], shown: int = 8) -> str:
    """A device set as one log line shows it: `[pool/device, pool/device share S]`,
    sorted, the first `shown` only (the names come from the API server)."""
    ordered = sorted(keys, key=lambda key: (key[0], key[1], key[2] or ""))
    names = [
        f"{one_line(pool)}/{one_line(device)}" + (f" share {one_line(share)}" if share else "")
        for pool, device, share in ordered[:shown]
    ]
    more = len(ordered) - shown
    return "[" + ", ".join(names) + (f", and {more} more" if more > 0 else "") + "]"


def path_value(value: Any, *path: str) -> Any:
    """The value at `path` of nested mappings read leniently: None where a step is missing
    or not a mapping."""
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value
