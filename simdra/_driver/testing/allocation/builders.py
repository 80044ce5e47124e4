"""Builders for the resource.k8s.io/v1 JSON the allocator reads: slices, classes, claims.

Plain dicts in the exact API shapes, for tests, demos and driver authors' CI, so a test
reads as "one slice with these devices, one class, one claim" instead of nested JSON.
"""

from __future__ import annotations

import uuid
from typing import Any

JSON = dict[str, Any]
API_VERSION = "resource.k8s.io/v1"


def resource_slice(
    driver: str,
    devices: list[JSON],
    *,
    pool: str = "node-a",
    node: str | None = "node-a",
    generation: int = 0,
    count: int = 1,
    name: str | None = None,
    shared_counters: list[JSON] | None = None,
) -> JSON:
    """A ResourceSlice of `pool`; `node=None` publishes it for all nodes."""
    spec: JSON = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
    }
    if node is None:
        spec["allNodes"] = True
    else:
        spec["nodeName"] = node
    if devices:
        spec["devices"] = devices
    if shared_counters:
        spec["sharedCounters"] = shared_counters
    default_name = f"{node or 'all-nodes'}-{driver}-{uuid.uuid4().hex[:8]}"
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": name or default_name},
        "spec": spec,
    }


def device_class(
    name: str,
    driver: str | None = None,
    *,
    selectors: tuple[str, ...] = (),
    config: list[JSON] | None = None,
) -> JSON:
    """A DeviceClass selecting `driver`'s devices (default: the class name) and more."""
    expressions = [f'device.driver == "{driver or name}"', *selectors]
    spec: JSON = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config:
        spec["config"] = config
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def exactly(name: str, device_class_name: str, **fields: Any) -> JSON:
    """A claim request with `exactly` (extra fields: count, selectors, capacity, ...)."""
    return {"name": name, "exactly": {"deviceClassName": device_class_name, **fields}}


def selector(expression: str) -> JSON:
    """One CEL selector entry."""
    return {"cel": {"expression": expression}}


def opaque_config(driver: str, requests: list[str] | None = None, **parameters: Any) -> JSON:
    """An opaque configuration entry (class or claim config)."""
    entry: JSON = {"opaque": {"driver": driver, "parameters": {**parameters}}}
    if requests:
        entry["requests"] = requests
    return entry


def claim(
    name: str,
    *requests: JSON,
    namespace: str = "default",
    constraints: list[JSON] | None = None,
    config: list[JSON] | None = None,
    uid: str | None = None,
) -> JSON:
    """A ResourceClaim (with a fresh UID unless given)."""
    devices: JSON = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    if config:
        devices["config"] = config
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or str(uuid.uuid4())},
        "spec": {"devices": devices},
    }
