"""Defaulting the API server applies when it decodes a resource.k8s.io/v1 body.

Clients see these values in what the server returns, so a driver comparing what it
wrote with what is stored must expect them (e.g. a taint's `timeAdded`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from simdra._driver.testing.apiserver.lifecycle import now

JSON = dict[str, Any]


def _requests(claim_spec: JSON) -> Iterator[JSON]:
    for request in (claim_spec.get("devices") or {}).get("requests") or []:
        if not isinstance(request, dict):
            continue
        if isinstance(request.get("exactly"), dict):
            yield request["exactly"]
        yield from (s for s in request.get("firstAvailable") or [] if isinstance(s, dict))


def _default_request(request: JSON) -> None:
    request.setdefault("allocationMode", "ExactCount")
    if request["allocationMode"] == "ExactCount" and not request.get("count"):
        request["count"] = 1
    for toleration in request.get("tolerations") or []:
        if isinstance(toleration, dict):
            toleration.setdefault("operator", "Equal")


def apply_defaults(resource: str, obj: JSON) -> JSON:
    """`obj` with the server's defaults filled in (a copy when anything changes)."""
    if resource == "resourceslices":
        return _default_slice(obj)
    if resource in ("resourceclaims", "resourceclaimtemplates"):
        return _default_claim(obj, resource)
    return obj


def _default_slice(obj: JSON) -> JSON:
    devices = (obj.get("spec") or {}).get("devices") or []
    missing = any(
        isinstance(t, dict) and not t.get("timeAdded")
        for d in devices
        if isinstance(d, dict)
        for t in d.get("taints") or []
    )
    if not missing:
        return obj
    obj = copy.deepcopy(obj)
    stamp = now()
    for device in obj["spec"]["devices"]:
        for taint in (device.get("taints") or []) if isinstance(device, dict) else []:
            if isinstance(taint, dict) and not taint.get("timeAdded"):
                taint["timeAdded"] = stamp
    return obj


def _default_claim(obj: JSON, resource: str) -> JSON:
    obj = copy.deepcopy(obj)
    spec = obj.get("spec") if resource == "resourceclaims" else (obj.get("spec") or {}).get("spec")
    if isinstance(spec, dict):
        for request in _requests(spec):
            _default_request(request)
    return obj
