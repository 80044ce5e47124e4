"""Picks -> `status.allocation` JSON (resource.k8s.io/v1 AllocationResult).

Config merging follows the scheduler: class config once per class, with the names of
the requests that used the class (`requests` dropped when every request did), then
the claim's config entries that apply to an allocated request or chosen subrequest.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from simdra._driver.core.quantity import format_quantity
from simdra._driver.devices.request_policy import consumed_text
from simdra._driver.testing.allocation.requests import RequestSpec
from simdra._driver.testing.allocation.search import Pick

JSON = dict[str, Any]


def build_allocation(claim: Mapping[str, Any], picks: list[Pick], node: str | None) -> JSON:
    """The AllocationResult for `claim` from the search's picks on `node`."""
    allocation: JSON = {
        "devices": {
            "results": [_result(pick) for pick in picks],
            "config": _config(claim, _chosen(picks)),
        }
    }
    if not allocation["devices"]["config"]:
        del allocation["devices"]["config"]
    selector = _node_selector(picks, node)
    if selector:
        allocation["nodeSelector"] = selector
    return allocation


def _result(pick: Pick) -> JSON:
    device = pick.device
    result: JSON = {
        "request": pick.spec.result_name,
        "driver": device.driver,
        "pool": device.pool,
        "device": device.name,
    }
    if pick.spec.admin_access:
        result["adminAccess"] = True
    if pick.spec.tolerations:
        result["tolerations"] = copy.deepcopy(list(pick.spec.tolerations))
    for field in ("bindingConditions", "bindingFailureConditions"):
        if device.spec.get(field):
            result[field] = list(device.spec[field])
    if pick.share_id is not None:
        result["shareID"] = pick.share_id
    if pick.consumed is not None:
        result["consumedCapacity"] = _consumed_texts(pick)
    if device.skip_node_operations:  # as the scheduler copies it from the slice
        result["skipNodeOperations"] = list(device.skip_node_operations)
    return result


def _consumed_texts(pick: Pick) -> dict[str, str]:
    """consumedCapacity as the scheduler writes it (see request_policy.consumed_text)."""
    assert pick.consumed is not None
    capacity = pick.device.spec.get("capacity") or {}
    requested = {pick.device.capacity_name(n) or n: str(a) for n, a in pick.spec.capacity.items()}
    texts = {}
    for name, amount in pick.consumed.items():
        entry = capacity.get(name)
        texts[name] = (consumed_text(entry, requested.get(name)) if entry is not None
                       else format_quantity(amount))
    return texts


def _chosen(picks: list[Pick]) -> list[RequestSpec]:
    """The alternative used for each request, in request order."""
    chosen: dict[str, RequestSpec] = {}
    for pick in picks:
        chosen.setdefault(pick.spec.request, pick.spec)
    return list(chosen.values())


def _config(claim: Mapping[str, Any], chosen: list[RequestSpec]) -> list[JSON]:
    entries: list[JSON] = []
    by_class: dict[str, list[JSON]] = {}
    for spec in chosen:
        if spec.class_name in by_class:
            for entry in by_class[spec.class_name]:
                entry["requests"].append(spec.result_name)
            continue
        by_class[spec.class_name] = [
            {"source": "FromClass", "requests": [spec.result_name], **_without_requests(item)}
            for item in (spec.device_class.get("spec") or {}).get("config") or []
        ]
        entries.extend(by_class[spec.class_name])
    for entry in entries:
        if len(entry["requests"]) == len(chosen):
            del entry["requests"]
    names = {spec.request for spec in chosen} | {spec.result_name for spec in chosen}
    for item in (claim["spec"].get("devices") or {}).get("config") or []:
        wanted = item.get("requests") or []
        if not wanted or names & set(wanted):
            entries.append({"source": "FromClaim", **copy.deepcopy(dict(item))})
    return entries


def _without_requests(item: Mapping[str, Any]) -> JSON:
    return {k: copy.deepcopy(v) for k, v in item.items() if k != "requests"}


def _node_selector(picks: list[Pick], node: str | None) -> JSON | None:
    """Pin to the node when any device is node-local or binds to its node."""
    local = any(p.device.node_name or p.device.spec.get("bindsToNode") for p in picks)
    if not local or not node:
        return None
    requirement = {"key": "metadata.name", "operator": "In", "values": [node]}
    return {"nodeSelectorTerms": [{"matchFields": [requirement]}]}
