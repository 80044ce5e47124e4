"""Read a ResourceClaim (resource.k8s.io/v1 JSON) into what this driver must prepare.

Pure: a dict in, a frozen `ClaimAllocation` out. Only `metadata` identity and
`status.allocation.devices` are read; every other field (spec, reservedFor, status.devices,
tolerations, binding conditions, ...) is ignored, so newer API fields never break us.
Results and opaque config of other drivers are dropped here: they are not ours to act on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.claims.device_metadata import POD_CLAIM_ANNOTATION
from simdra._driver.claims.errors import ClaimError, claim_label
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.quantity import QuantityError, parse_quantity
from simdra._driver.core.textlimits import one_line
from simdra._driver.core.validation.names import uuid_errors

_RESULTS = "status.allocation.devices.results"
_CONFIG = "status.allocation.devices.config"


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

    @property
    def label(self) -> str:
        """How error messages name this claim."""
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
        _check_identity(expected, namespace, name, uid)
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


def _check_identity(expected: ClaimRef, namespace: str, name: str, uid: str) -> None:
    where = claim_label(expected.namespace, expected.name, expected.uid)
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
