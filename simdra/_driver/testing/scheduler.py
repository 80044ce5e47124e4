"""A scheduler stand-in: allocates ResourceClaims against published ResourceSlices.

Used by simdra's integration tests, by `simdra demo` and by driver authors' CI, where no
kube-scheduler runs. It follows the structured-parameters allocator of kube-scheduler for
the cases it supports (facts sections 4 and 5):

* pools: highest generation only, complete pools only;
* requests: `exactly` (ExactCount / All, selectors, adminAccess, capacity, tolerations)
  and `firstAvailable` (results named `<request>/<subrequest>`);
* exclusive devices once across all claims; multi-allocatable devices as shares with a
  fresh shareID and consumedCapacity for every capacity (request policy rounding);
* partitionable devices: consumesCounters against the pool's sharedCounters;
* taints NoSchedule/NoExecute unless tolerated; constraints matchAttribute and
  distinctAttribute; CEL selectors (cel-python with the Kubernetes DRA environment,
  `simdra._driver.testing.allocation.cel`).

Admin access: like the scheduler, an adminAccess result does not need a device that no
other claim holds and does not count as using one (other claims can still get the
device, and its consumedCapacity is not added up); but it is held to the remaining
capacity of a multi-allocatable device and to the pool's counters like any other. On a
multi-allocatable device it gets its own shareID and the consumedCapacity its request
implies. allocationTimestamp is not set (only binding conditions use it).

Also as the scheduler: capacity names are looked up exactly; an existing result is a
share when it has a shareID; a pool with a duplicate device or counter set name, or
a device consuming an unknown counter set, is not used; a request for all devices
fails while a pool on the node is incomplete or invalid. `tests/testing/
allocator_corpus.py` holds recorded real-scheduler allocations that this follows.

`allocate()` is pure; `Allocator` reads and writes through the official client.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubernetes.client import ApiClient, ResourceV1Api
from kubernetes.client.exceptions import ApiException

from simdra._driver.core.taint_rules import with_rule_taints
from simdra._driver.kube import response_json
from simdra._driver.testing.allocation.cel import UnsupportedExpression
from simdra._driver.testing.allocation.diagnose import explain
from simdra._driver.testing.allocation.errors import AllocationError
from simdra._driver.testing.allocation.pools import (
    candidates_for_node,
    gather_pools,
    node_names,
    unusable_pools,
)
from simdra._driver.testing.allocation.requests import (
    claim_label,
    parse_constraints,
    parse_requests,
)
from simdra._driver.testing.allocation.result import build_allocation
from simdra._driver.testing.allocation.search import Search
from simdra._driver.testing.allocation.taken import Usage

__all__ = ["AllocationError", "Allocator", "UnsupportedExpression", "allocate"]

JSON = dict[str, Any]


def allocate(
    claim: Mapping[str, Any],
    slices: Iterable[Mapping[str, Any]],
    classes: Mapping[str, Mapping[str, Any]],
    in_use: Iterable[Mapping[str, Any]] = (),
    *,
    node_name: str | None = None,
    new_share_id: Callable[[], str] | None = None,
    taint_rules: Sequence[Mapping[str, Any]] = (),
) -> JSON:
    """Compute `status.allocation` for `claim`; raise AllocationError when it cannot fit.

    `slices` are ResourceSlice objects, `classes` DeviceClass objects by name, `in_use`
    ResourceClaims whose allocations count as taken (the claim itself, by UID, is
    skipped), `taint_rules` DeviceTaintRules (their taints count as the devices' own).
    Without `node_name` the nodes that publish devices are tried in name order.
    """
    pools = gather_pools(with_rule_taints(slices, taint_rules))
    requests = parse_requests(claim, classes)
    constraints = parse_constraints(claim)
    usage = Usage.from_claims(in_use, pools, (claim.get("metadata") or {}).get("uid"))
    nodes: list[str | None] = [node_name] if node_name else [*node_names(pools)] or [None]
    share_id = new_share_id or (lambda: str(uuid.uuid4()))
    failures = []
    wants_all = any(spec.mode == "All" for alternatives in requests for spec in alternatives)
    for node in nodes:
        blocked = unusable_pools(pools, node) if wants_all else []
        if blocked:
            reason = f"asks for all devices, but {'; '.join(blocked)}"
            failures.append(reason if len(nodes) == 1 else f"node {node}: {reason}")
            continue
        candidates = candidates_for_node(pools, node)
        picks = Search(claim, requests, constraints, candidates, usage, share_id).run()
        if picks is not None:
            return build_allocation(claim, picks, node)
        reason = explain(claim, requests, constraints, candidates, usage, node)
        failures.append(reason if len(nodes) == 1 else f"node {node}: {reason}")
    raise AllocationError(f"claim {claim_label(claim)}: {' | '.join(failures)}")


class Allocator:
    """Allocates claims in an API server, as the scheduler would before a pod starts."""

    # One process may run several allocators (tests in threads): compute + write of one
    # claim must not interleave with another's, or two claims could get the same device.
    _lock = threading.Lock()

    def __init__(self, api_client: ApiClient, *, node_name: str | None = None) -> None:
        self._api = ResourceV1Api(api_client)
        self._node_name = node_name

    def allocate(
        self,
        namespace: str,
        name: str,
        *,
        pod_name: str | None = None,
        pod_uid: str | None = None,
        node_name: str | None = None,
        attempts: int = 5,
        pod_group: tuple[str, str] | None = None,
    ) -> JSON:
        """Allocate the claim (if not yet allocated) and reserve it for the pod, if given,
        or for the PodGroup `pod_group` (name, uid): what the scheduler writes for a
        claim of a PodGroup's spec.resourceClaims (DRAWorkloadResourceClaims), whose
        pods share it without being named in status.reservedFor.

        Returns the claim as written. An already allocated claim keeps its allocation and
        only gains the reservation, as when a second pod shares a claim.
        """
        if (pod_name is None) != (pod_uid is None):
            raise ValueError("pod_name and pod_uid go together")
        consumer = _consumer(pod_name, pod_uid, pod_group)
        with self._lock:
            for _ in range(attempts):
                claim = self._read_claim(namespace, name)
                changed = self._allocate_into(claim, node_name or self._node_name)
                if consumer is not None:
                    changed |= _reserve(claim, consumer)
                if not changed:
                    return claim
                written = self._write_status(claim)
                if written is not None:
                    return written
        raise AllocationError(f"claim {namespace}/{name}: status write conflicted {attempts} times")

    def deallocate(self, namespace: str, name: str) -> JSON:
        """Clear allocation and reservations (what the scheduler does once no pod uses it)."""
        with self._lock:
            for _ in range(5):
                claim = self._read_claim(namespace, name)
                status = claim.setdefault("status", {})
                status.pop("allocation", None)
                status.pop("reservedFor", None)
                written = self._write_status(claim)
                if written is not None:
                    return written
        raise AllocationError(f"claim {namespace}/{name}: status write kept conflicting")

    def _allocate_into(self, claim: JSON, node_name: str | None) -> bool:
        status = claim.setdefault("status", {})
        if status.get("allocation"):
            return False
        slices = self._items(self._api.list_resource_slice)
        classes = {c["metadata"]["name"]: c for c in self._items(self._api.list_device_class)}
        claims = self._items(self._api.list_resource_claim_for_all_namespaces)
        rules = self._items(self._api.list_device_taint_rule)
        status["allocation"] = allocate(claim, slices, classes, claims, node_name=node_name,
                                        taint_rules=rules)
        return True

    def _read_claim(self, namespace: str, name: str) -> JSON:
        response = self._api.read_namespaced_resource_claim(name, namespace, _preload_content=False)
        claim: JSON = response_json(response)
        return claim

    def _write_status(self, claim: JSON) -> JSON | None:
        """The written claim, or None on a conflict (someone else changed it first)."""
        meta = claim["metadata"]
        try:
            # The client turns the dict into the model (pydantic); its annotations name
            # only the model.
            response = self._api.replace_namespaced_resource_claim_status(
                meta["name"], meta["namespace"], claim, _preload_content=False  # type: ignore[arg-type]
            )
        except ApiException as error:
            if error.status == 409:
                return None
            raise
        written: JSON = response_json(response)
        return written

    @staticmethod
    def _items(lister: Callable[..., Any]) -> list[JSON]:
        return list(json.loads(lister(_preload_content=False).data).get("items") or [])


def _consumer(
    pod_name: str | None, pod_uid: str | None, pod_group: tuple[str, str] | None
) -> JSON | None:
    """The status.reservedFor entry for the pod or the PodGroup (one of them at most)."""
    if pod_group is not None:
        if pod_name is not None:
            raise ValueError("a claim is reserved for a pod or for its PodGroup, not both")
        group_name, group_uid = pod_group
        return {"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                "name": group_name, "uid": group_uid}
    if pod_name and pod_uid:
        return {"resource": "pods", "name": pod_name, "uid": pod_uid}
    return None


def _reserve(claim: JSON, consumer: JSON) -> bool:
    """Add the consumer to status.reservedFor; False when it is already there."""
    reserved = claim["status"].setdefault("reservedFor", [])
    if any(entry.get("uid") == consumer["uid"] for entry in reserved):
        return False
    reserved.append(consumer)
    return True
