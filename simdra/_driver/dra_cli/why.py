"""`kubectl dra why`: why a claim is not allocated, request by request and device by
device, on the test harness's allocator (`simdra._driver.testing.allocation`, the scheduler's
structured allocation as the harness follows it).

For each request (each `firstAvailable` subrequest) every published device gets the
FIRST check it fails, in the scheduler's order: its pool is incomplete or invalid, its
node is not the pod's (or not one the pod's nodeSelector allows), a CEL selector of the
class (stage "class") or of the request ("selector") is false (quoted) or fails, then what
the harness's `Search.rejection` says (a taint not tolerated, already allocated, counters
exhausted, capacity left, constraints). The verdict runs the harness's search node by
node: allocatable now on the first node where every request fits, else not allocatable.

A DeviceTaintRule's taint counts as the device's own, as the scheduler counts it. Not
modelled (as in the harness): slices that select their nodes with a nodeSelector (their
devices are listed as such, not evaluated).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simdra._driver.core.taint_rules import with_rule_taints
from simdra._driver.dra_cli.gather import Snapshot
from simdra._driver.dra_cli.inventory import claim_name
from simdra._driver.dra_cli.selectors import SharedSearch, SharedSelectors
from simdra._driver.testing.allocation.cel import SelectorError, UnsupportedExpression
from simdra._driver.testing.allocation.errors import AllocationError
from simdra._driver.testing.allocation.pools import Candidate, Pool, gather_pools, unusable_pools
from simdra._driver.testing.allocation.requests import (
    Constraint,
    RequestSpec,
    parse_constraints,
    parse_requests,
)
from simdra._driver.testing.allocation.taken import Usage

JSON = dict[str, Any]
ADMIN_LABEL = "resource.kubernetes.io/admin-access"
# The checks in the order they are made; a device is reported with the first it fails.
# "class": a selector of the request's DeviceClass, "selector": one of the request.
STAGES = ("pool", "node", "class", "selector", "taint", "allocated", "counters",
          "constraint", "capacity", "usable")
# The stages from least to most promising, for listing devices: one its class rejects is
# not the kind of device asked for, one of an incomplete pool or another node might be.
PROMISE = ("class", "pool", "node", "selector", "taint", "allocated", "counters",
           "constraint", "capacity", "usable")


@dataclass(frozen=True)
class DeviceCheck:
    """One device for one request: the first check it fails (stage "usable": none)."""

    device: str  # node/driver/pool/device
    stage: str
    reason: str


@dataclass(frozen=True)
class RequestReport:
    """One request (or subrequest) of a claim, with its devices checked."""

    request: str
    device_class: str
    wanted: str  # "1", "2", "all"
    problem: str  # what fails the whole request ("" when nothing does)
    devices: tuple[DeviceCheck, ...]

    @property
    def usable(self) -> int:
        """Devices that pass every check."""
        return sum(1 for d in self.devices if d.stage == "usable")


@dataclass(frozen=True)
class ClaimReport:
    """A claim: where it is allocated, or why it is not."""

    claim: str
    allocated: bool
    verdict: str
    node: str | None = None  # where it is (or could be) allocated
    results: tuple[str, ...] = ()  # driver/pool/device (request) of an allocation
    reserved_for: tuple[str, ...] = ()
    requests: tuple[RequestReport, ...] = ()
    error: str = ""  # the claim cannot be evaluated at all (class missing, bad CEL)


@dataclass(frozen=True)
class Placement:
    """Where the pod may run: its node, or the nodes its nodeSelector allows."""

    node: str | None = None
    allowed: frozenset[str] | None = None  # None: every node
    selector: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, pod: Mapping[str, Any] | None, nodes: Iterable[Mapping[str, Any]]) -> Placement:
        """The placement of `pod` (None: anywhere)."""
        spec = (pod or {}).get("spec") or {}
        if spec.get("nodeName"):
            return cls(node=str(spec["nodeName"]))
        wanted: Mapping[str, str] = spec.get("nodeSelector") or {}
        if not wanted:
            return cls()
        allowed = frozenset(
            str((n.get("metadata") or {}).get("name", "")) for n in nodes
            if all(((n.get("metadata") or {}).get("labels") or {}).get(k) == v
                   for k, v in wanted.items()))
        return cls(allowed=allowed, selector=wanted)

    def rejects(self, node: str | None) -> str:
        """Why a device local to `node` cannot serve the pod ("" when it can)."""
        if node is None:
            return ""
        if self.node is not None and node != self.node:
            return f"on node {node}, the pod is bound to {self.node}"
        if self.allowed is not None and node not in self.allowed:
            labels = ",".join(f"{k}={v}" for k, v in sorted(self.selector.items()))
            return f"node {node} does not match the pod's nodeSelector {labels}"
        return ""

    def nodes(self, candidates: Iterable[str]) -> list[str]:
        """The nodes to try, of `candidates`."""
        return [n for n in candidates if not self.rejects(n)]


def explain(claim: Mapping[str, Any], snapshot: Snapshot, placement: Placement,
            namespace_labels: Mapping[str, str] | None = None) -> ClaimReport:
    """The report of one claim against the snapshot. `namespace_labels`: the claim's
    namespace's labels, None when they could not be read (admin access not checked)."""
    name = claim_name(claim)
    status = claim.get("status") or {}
    if status.get("allocation"):
        return _allocated(name, status)
    classes = {str((c.get("metadata") or {}).get("name", "")): c for c in snapshot.classes}
    try:
        requests = parse_requests(claim, classes)
        constraints = parse_constraints(claim)
    except (AllocationError, UnsupportedExpression) as err:
        text = str(err).removeprefix(f"claim {name}: ")
        return ClaimReport(name, False, "not allocatable", error=text)
    pools = gather_pools(with_rule_taints(snapshot.slices, snapshot.taint_rules))
    usage = Usage.from_claims(snapshot.claims, pools, (claim.get("metadata") or {}).get("uid"))
    devices = _all_devices(pools)
    shared = SharedSelectors()  # one result for the devices that look alike to a selector
    search = SharedSearch(claim, requests, constraints, [d for d, _ in devices], usage,
                          shared=shared)
    reports = tuple(
        _request_report(search, spec, devices, placement, namespace_labels)
        for alternatives in requests for spec in alternatives)
    verdict, node = _verdict(claim, requests, constraints, pools, usage, placement, shared)
    if node is None and verdict.startswith("not") and all(r.usable for r in reports):
        verdict += " (each request has usable devices, but not all together on one node)"
    return ClaimReport(name, False, verdict, node=node, requests=reports)


def _allocated(name: str, status: Mapping[str, Any]) -> ClaimReport:
    allocation = status.get("allocation") or {}
    results = tuple(
        f"{r.get('driver')}/{r.get('pool')}/{r.get('device')} ({r.get('request')})"
        for r in (allocation.get("devices") or {}).get("results") or [])
    node = allocated_node(allocation)
    pods = tuple(str(r.get("name", "")) for r in status.get("reservedFor") or [])
    where = f"on node {node}" if node else "for every node"
    return ClaimReport(name, True, f"allocated {where}", node=node, results=results,
                       reserved_for=pods)


def allocated_node(allocation: Mapping[str, Any]) -> str | None:
    """The node an allocation's nodeSelector names (matchFields metadata.name)."""
    for term in (allocation.get("nodeSelector") or {}).get("nodeSelectorTerms") or []:
        for match in term.get("matchFields") or []:
            if match.get("key") == "metadata.name" and match.get("values"):
                return str(match["values"][0])
    return None


def _all_devices(pools: list[Pool]) -> list[tuple[Candidate, str]]:
    """Every device placed on a node or on all nodes, with why its pool is unusable."""
    found: list[tuple[Candidate, str]] = []
    for pool in pools:
        why = "" if pool.usable else (
            f"pool {pool.driver}/{pool.name} {pool.invalid or 'is incomplete'} "
            f"({len(pool.slices)} of {pool.expected_slices} slices of generation "
            f"{pool.generation} published)")
        found.extend((device, why) for device in pool.candidates)
    return found


def _request_report(search: SharedSearch, spec: RequestSpec,
                    devices: list[tuple[Candidate, str]], placement: Placement,
                    namespace_labels: Mapping[str, str] | None) -> RequestReport:
    problem = ""
    if spec.admin_access and namespace_labels is not None \
            and namespace_labels.get(ADMIN_LABEL) != "true":
        problem = f"admin access needs the namespace label {ADMIN_LABEL}=true, which is missing"
    checks = tuple(_check(search, spec, device, pool_problem, placement)
                   for device, pool_problem in devices)
    wanted = "all" if spec.mode == "All" else str(spec.count)
    return RequestReport(spec.result_name, spec.class_name, wanted, problem, checks)


def _check(search: SharedSearch, spec: RequestSpec, device: Candidate, pool_problem: str,
           placement: Placement) -> DeviceCheck:
    label = f"{device.node_name or '*'}/{device.driver}/{device.pool}/{device.name}"
    if pool_problem:
        return DeviceCheck(label, "pool", pool_problem)
    node_problem = placement.rejects(device.node_name)
    if node_problem:
        return DeviceCheck(label, "node", node_problem)
    stage, selector_problem = _selectors(search.shared, spec, device)
    if selector_problem:
        return DeviceCheck(label, stage, selector_problem)
    rejection = search.rejection(spec, device)
    if rejection is None:
        return DeviceCheck(label, "usable", "usable")
    return DeviceCheck(label, _stage(rejection.reason, rejection.capacity), rejection.reason)


def _selectors(shared: SharedSelectors, spec: RequestSpec,
               device: Candidate) -> tuple[str, str]:
    """The stage ("class" or "selector") and the first selector that is false or fails,
    quoted (("", "") when all match)."""
    from_class = len((spec.device_class.get("spec") or {}).get("selectors") or [])
    for index, selector in enumerate(spec.selectors):
        stage, owner = ("class", f"class {spec.class_name}") if index < from_class else (
            "selector", f"request {spec.request}")
        try:
            if not shared.matches(selector, device):
                return stage, f"selector `{selector.expression}` of {owner} is false"
        except SelectorError as err:
            return stage, f"{owner}: {err}"
    return "", ""


def _stage(reason: str, capacity: str | None) -> str:
    if "taint" in reason:
        return "taint"
    if "in use" in reason or "already allocated" in reason:
        return "allocated"
    if reason.startswith("counter"):
        return "counters"
    if reason.startswith(("matchAttribute", "distinctAttribute", "lacks attribute")):
        return "constraint"
    return "capacity" if capacity or "capacity" in reason or "less than" in reason else "other"


def _verdict(claim: Mapping[str, Any], requests: list[list[RequestSpec]],
             constraints: list[Constraint], pools: list[Pool], usage: Usage,
             placement: Placement, shared: SharedSelectors) -> tuple[str, str | None]:
    """("allocatable now on node X: devices" or "not allocatable now", node)."""
    by_node: dict[str | None, list[Candidate]] = {}
    for pool in pools:
        for device in pool.candidates if pool.usable else ():
            by_node.setdefault(device.node_name, []).append(device)
    everywhere = by_node.pop(None, [])
    wants_all = any(s.mode == "All" for alternatives in requests for s in alternatives)
    nodes: list[str | None] = [*placement.nodes(sorted(n for n in by_node if n is not None))]
    if not nodes:
        nodes = [placement.node]
    errors = []
    for node in nodes:
        if wants_all and unusable_pools(pools, node):
            continue
        candidates = [*by_node.get(node, []), *everywhere] if node else everywhere
        try:
            picks = SharedSearch(claim, requests, constraints, candidates, usage,
                                 shared=shared).run()
        except (AllocationError, SelectorError) as err:  # fails this node, as the scheduler
            errors.append(f"node {node}: {str(err).removeprefix(f'claim {claim_name(claim)}: ')}")
            continue
        if picks is not None:
            chosen = ", ".join(f"{p.device.driver}/{p.device.pool}/{p.device.name}"
                               for p in picks)
            where = f"on node {node}" if node else "(devices for all nodes)"
            return f"allocatable now {where}: {chosen}", node
    failed = f" ({'; '.join(errors[:3])}{'; ...' if len(errors) > 3 else ''})" if errors else ""
    return f"not allocatable now{failed}", None
