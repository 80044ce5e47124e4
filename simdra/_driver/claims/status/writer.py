"""Claim status: our entries in a ResourceClaim's `status.devices` (api-facts 5.3).

After a claim is prepared, every prepared unit (device, or share of a device) gets one
entry keyed by (driver, pool, device, shareID) with

* a `Ready` condition (status True, reason `Prepared`, the CDI device in the message,
  `observedGeneration` = the claim's generation; `lastTransitionTime` kept from an
  existing True condition, so re-preparing does not churn the object);
* `data`: a small JSON object with the device type, its scalar attributes, the requests,
  the CDI device id, what a share consumed, admin access and the effective opaque
  config, kept under the API's 10 KiB limit (config, then attributes are dropped if
  needed);
* `networkData` for NICs: `interfaceName` and `hardwareAddress` from the attributes
  `interfaceName` / `macAddress`; `ips` from an optional `ips` attribute (a string of
  comma-separated CIDRs, or a list of strings), invalid or excess entries dropped. The
  simulated NIC has no addresses, so its entries carry none.

On unprepare our entries are removed. Entries of other drivers are never touched.
`our_status_devices` computes our entries (pure); `ClaimStatusWriter` reads the claim
(for the generation and the Ready conditions' transition times) and writes them by
server-side apply on the `status` subresource, with the driver name as field manager:
`status.devices` is a map list keyed by driver, device, pool and shareID, so the API
server merges our entries with everyone else's and removes those we applied before and
omit now, and another writer's entries are never part of what we send. Entries of our
driver that we do not own (written by merge patch, before simdra used apply) are then
removed by a JSON patch that tests each one first.

Failure policy: status is informative (nothing in Kubernetes waits for it unless a
device uses binding conditions, which ours do not), so a failed write never fails the
prepare or unprepare. `ClaimStatusWriter.sync` does one write and raises when it cannot;
queueing, retrying and superseding live in `simdra._driver.claims.status.worker`, which runs
the writes off the prepare path.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from simdra._driver.claims.plan.prepared import PreparedClaim, PreparedUnit
from simdra._driver.claims.types import ClaimRef, claim_label
from simdra._driver.core.quantity import quantity_text
from simdra._driver.kubeapi import ApiStatusError, RestClient, status_text

log = logging.getLogger(__name__)

JSON = dict[str, Any]
READY = "Ready"
REASON_PREPARED = "Prepared"
DATA_LIMIT_BYTES = 10 * 1024
MAX_IPS = 16
MAX_INTERFACE_NAME = 256
MAX_HARDWARE_ADDRESS = 128
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"
CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}"
DEFAULT_TIMEOUT_S = 5.0  # per request; prepare holds the kubelet's 45 s deadline


def now_rfc3339() -> str:
    """The current time as metav1.Time text (seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- pure ---------------------------------------------------------------------------


def _key(entry: Mapping[str, Any]) -> tuple[Any, Any, Any, Any]:
    return (entry.get("driver"), entry.get("pool"), entry.get("device"), entry.get("shareID"))


def updated_status_devices(
    current: Sequence[Mapping[str, Any]] | None,
    driver: str,
    prepared: PreparedClaim | None,
    *,
    now: str,
    generation: int | None = None,
) -> list[JSON]:
    """`status.devices` with our entries replaced by those of `prepared` (None: removed):
    other drivers' entries keep their content and order; ours follow them."""
    others = [copy.deepcopy(dict(e)) for e in current or [] if e.get("driver") != driver]
    return others + our_status_devices(current, driver, prepared, now=now, generation=generation)


def our_status_devices(
    current: Sequence[Mapping[str, Any]] | None,
    driver: str,
    prepared: PreparedClaim | None,
    *,
    now: str,
    generation: int | None = None,
) -> list[JSON]:
    """Our entries for `prepared` (none for None), in unit order; the Ready conditions
    keep their transition time from `current`."""
    if prepared is None:
        return []
    previous = {_key(e): e for e in current or [] if e.get("driver") == driver}
    return [
        device_status(
            unit, driver, now=now, generation=generation,
            previous=previous.get((driver, unit.pool, unit.device, unit.share_id)),
        )
        for unit in prepared.units
    ]


def device_status(
    unit: PreparedUnit,
    driver: str,
    *,
    now: str,
    generation: int | None = None,
    previous: Mapping[str, Any] | None = None,
) -> JSON:
    """One `status.devices` entry for a prepared unit."""
    entry: JSON = {"driver": driver, "pool": unit.pool, "device": unit.device}
    if unit.share_id is not None:
        entry["shareID"] = unit.share_id
    entry["conditions"] = [_ready(unit, now, generation, previous)]
    entry["data"] = status_data(unit)
    network = network_data(unit)
    if network:
        entry["networkData"] = network
    return entry


def _ready(
    unit: PreparedUnit, now: str, generation: int | None, previous: Mapping[str, Any] | None
) -> JSON:
    since = now
    for old in (previous or {}).get("conditions") or []:
        if old.get("type") == READY and old.get("status") == "True":
            since = old.get("lastTransitionTime") or now
    condition: JSON = {
        "type": READY,
        "status": "True",
        "reason": REASON_PREPARED,
        "message": f"prepared on the node as CDI device {unit.cdi_id}",
        "lastTransitionTime": since,
    }
    if generation is not None:
        condition["observedGeneration"] = generation
    return condition


def status_data(unit: PreparedUnit) -> JSON:
    """The `data` object of a unit's entry, at most DATA_LIMIT_BYTES of JSON."""
    data: JSON = {"type": unit.device_type, "cdiDeviceID": unit.cdi_id}
    data["requests"] = list(unit.requests)
    attributes = {
        name: value
        for name in sorted(unit.attributes)
        if isinstance(value := unit.attribute(name), str | int | bool)
    }
    if attributes:
        data["attributes"] = attributes
    if not unit.exclusive:
        data["consumedCapacity"] = {
            name: quantity_text(amount) for name, amount in sorted(unit.consumed_capacity.items())
        }
    if unit.admin_access:
        data["adminAccess"] = True
    if unit.config:
        data["config"] = copy.deepcopy(dict(unit.config))
    for optional in ("config", "attributes"):
        if _size(data) <= DATA_LIMIT_BYTES:
            break
        data.pop(optional, None)
    return data


def network_data(unit: PreparedUnit) -> JSON:
    """`networkData` for a NIC ({} for other devices or when nothing is known)."""
    if unit.device_type != "nic":
        return {}
    network: JSON = {}
    interface = unit.attribute("interfaceName")
    if isinstance(interface, str) and 0 < len(interface) <= MAX_INTERFACE_NAME:
        network["interfaceName"] = interface
    ips = _cidrs(unit.attribute("ips"))
    if ips:
        network["ips"] = ips
    mac = unit.attribute("macAddress")
    if isinstance(mac, str) and 0 < len(mac) <= MAX_HARDWARE_ADDRESS:
        network["hardwareAddress"] = mac
    return network


def _cidrs(raw: Any) -> list[str]:
    items = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    found: list[str] = []
    for item in items:
        text = str(item).strip()
        try:
            if "/" not in text:
                raise ValueError("no prefix length")
            ipaddress.ip_interface(text)
        except ValueError:
            log.warning("ignoring %r in the ips attribute: not a CIDR address", text)
            continue
        if text not in found and len(found) < MAX_IPS:
            found.append(text)
    return found


def _size(data: JSON) -> int:
    return len(json.dumps(data, separators=(",", ":")).encode())


# --- side effects -------------------------------------------------------------------


class StatusWriteError(Exception):
    """A status write that did not happen; the message names the claim and the cause."""


class ClaimStatusWriter:
    """Writes our `status.devices` entries through our API client (`sync`)."""

    def __init__(
        self,
        api_client: RestClient,
        driver_name: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        attempts: int = 5,
        clock: Callable[[], str] = now_rfc3339,
    ) -> None:
        self._api = api_client
        self._driver = driver_name
        self._timeout_s = timeout_s
        self._attempts = attempts
        self._clock = clock

    def sync(self, ref: ClaimRef, prepared: PreparedClaim | None) -> bool:
        """Make the claim's `status.devices` match; True when it wrote something.

        Raises StatusWriteError (or the client's connection error) when it cannot.
        """
        for _ in range(self._attempts):
            claim = self._read(ref)
            if claim is None:
                return False
            metadata = claim.get("metadata") or {}
            current = (claim.get("status") or {}).get("devices") or []
            wanted = our_status_devices(
                current, self._driver, prepared, now=self._clock(),
                generation=metadata.get("generation"),
            )
            if [e for e in current if e.get("driver") == self._driver] == wanted:
                return False
            after = self._apply(ref, wanted)
            if after == 404:
                return True  # gone meanwhile: nothing left to write
            if isinstance(after, dict) and self._drop_leftovers(ref, after, wanted):
                return True
            # 409 (replaced or changed meanwhile) or leftovers that changed: read again
        raise StatusWriteError(
            f"{_label(ref)}: status.devices: still conflicting after {self._attempts} attempts"
        )

    def _read(self, ref: ClaimRef) -> JSON | None:
        """The claim as JSON, or None when it is gone or replaced (nothing to write)."""
        try:
            claim: JSON = self._api.request("GET", _path(ref), timeout=self._timeout_s)
        except ApiStatusError as exc:
            if exc.status == 404:
                return None
            raise StatusWriteError(
                f"{_label(ref)}: read claim: {status_text(*exc.parts())}"
            ) from None
        if (claim.get("metadata") or {}).get("uid") != ref.uid:
            log.info("not writing status of %s: the claim was replaced", _label(ref))
            return None
        return claim

    def _apply(self, ref: ClaimRef, devices: list[JSON]) -> JSON | int:
        """Apply our entries (all of them: those applied before and omitted now go);
        the claim after it, or 404 (gone) or 409 (replaced or changed meanwhile)."""
        config: JSON = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            # the uid is a precondition: a claim replaced meanwhile answers 409
            "metadata": {"name": ref.name, "namespace": ref.namespace, "uid": ref.uid},
        }
        if devices:
            config["status"] = {"devices": devices}
        return self._send(ref, "apply status.devices", config, APPLY_PATCH, (404, 409),
                          fieldManager=self._driver, force=True)

    def _drop_leftovers(self, ref: ClaimRef, claim: JSON, wanted: list[JSON]) -> bool:
        """Remove our driver's entries the apply left (not ours to apply: written before
        simdra used apply); False when the claim changed meanwhile (try again)."""
        devices = (claim.get("status") or {}).get("devices") or []
        keep = {_key(e) for e in wanted}
        operations: list[JSON] = []
        for i in reversed(range(len(devices))):
            if devices[i].get("driver") == self._driver and _key(devices[i]) not in keep:
                path = f"/status/devices/{i}"
                operations += [{"op": "test", "path": path, "value": devices[i]},
                               {"op": "remove", "path": path}]
        if not operations:
            return True
        # 422: a test failed (the entry changed meanwhile); 404: gone, nothing to remove
        sent = self._send(ref, "remove leftover status.devices", operations, JSON_PATCH,
                          (404, 409, 422))
        return sent not in (409, 422)

    def _send(self, ref: ClaimRef, what: str, body: Any, content_type: str,
              expected: tuple[int, ...], **options: Any) -> JSON | int:
        """One PATCH of the status: the claim after it, or the HTTP status of an
        `expected` error answer; StatusWriteError for any other."""
        try:
            claim: JSON = self._api.request(
                "PATCH", _path(ref) + "/status", query=options, body=body,
                content_type=content_type, timeout=self._timeout_s,
            )
        except ApiStatusError as exc:
            if exc.status in expected:
                return exc.status
            raise StatusWriteError(
                f"{_label(ref)}: {what}: {status_text(*exc.parts())}") from None
        return claim


def _path(ref: ClaimRef) -> str:
    return CLAIM_PATH.format(namespace=quote(ref.namespace, safe=""),
                             name=quote(ref.name, safe=""))


def _label(ref: ClaimRef) -> str:
    return claim_label(ref.namespace, ref.name, ref.uid)
