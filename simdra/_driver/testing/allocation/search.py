"""Depth-first search for one claim: the first set of devices that satisfies every request.

Like the scheduler's structured allocator: requests in claim order, `firstAvailable`
alternatives in order, devices in pool/slice order, combinations (not permutations)
within one request, backtracking on failure. State changes go through `Usage` and
per-claim constraint stacks and are undone exactly when a branch fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from simdra._driver.core.quantity import parse_quantity
from simdra._driver.devices.request_policy import NoFit, consumed_amount
from simdra._driver.testing.allocation.cel import SelectorError
from simdra._driver.testing.allocation.errors import AllocationError
from simdra._driver.testing.allocation.format import human_quantity
from simdra._driver.testing.allocation.pools import Candidate
from simdra._driver.testing.allocation.requests import (
    Constraint,
    RequestSpec,
    blocking_taint,
    claim_label,
)
from simdra._driver.testing.allocation.taken import Usage

MAX_STEPS = 200_000  # a test allocator should fail loudly rather than search forever
MAX_RESULTS = 32  # status.allocation.devices.results limit (API validation)


@dataclass(frozen=True)
class Pick:
    """One chosen device for one request: becomes one allocation result."""

    spec: RequestSpec
    device: Candidate
    consumed: Mapping[str, Fraction] | None  # every capacity, for multi-allocatable devices
    share_id: str | None


@dataclass(frozen=True)
class Rejection:
    """Why one device cannot serve one request right now."""

    device: str
    reason: str
    capacity: str | None = None  # set when the device only lacks this capacity
    amount: Fraction | None = None  # what the request would consume of it
    used: str = ""  # "9.5G of 10G used", for capacity rejections


Undo = Callable[[], None]


class Search:
    """Allocation search for one claim on one node."""

    def __init__(
        self,
        claim: Mapping[str, Any],
        requests: list[list[RequestSpec]],
        constraints: list[Constraint],
        candidates: list[Candidate],
        usage: Usage,
        new_share_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.label = claim_label(claim)
        self.requests = requests
        self.constraints = constraints
        self.candidates = candidates
        self.usage = usage
        self.new_share_id = new_share_id
        self.picks: list[Pick] = []
        self._undo: list[Undo] = []  # one entry per pick, in pick order
        self._values: list[list[AttributeSet]] = [[] for _ in constraints]
        self._matches: dict[tuple[int, int], bool] = {}
        self._steps = 0

    def run(self) -> list[Pick] | None:
        """The picks of the first solution, or None; the usage ledger is left unchanged."""
        if not self._request(0):
            return None
        solution = list(self.picks)
        while self._undo:
            self._undo[-1]()
        return solution

    def rejection(self, spec: RequestSpec, device: Candidate) -> Rejection | None:
        """Why `device` cannot serve `spec` in the current state (None: it can)."""
        outcome = self._try(spec, device)
        if isinstance(outcome, Rejection):
            return outcome
        outcome()
        return None

    def matches(self, spec: RequestSpec, device: Candidate) -> bool:
        """Class and request selectors (cached per request and device)."""
        key = (id(spec), id(device))
        if key not in self._matches:
            try:
                self._matches[key] = all(s.matches(device.view) for s in spec.selectors)
            except SelectorError as error:
                raise SelectorError(
                    f"claim {self.label}: request {spec.result_name}: device "
                    f"{'/'.join(device.key)}: {error}"
                ) from None
        return self._matches[key]

    # -- search

    def _request(self, index: int) -> bool:
        if index == len(self.requests):
            return True
        for spec in self.requests[index]:
            if spec.mode == "All":
                devices = [d for d in self.candidates if self._counts_for_all(spec, d)]
                if devices and self._all(spec, devices, 0, index):
                    return True
            elif self._count(spec, spec.count, 0, index):
                return True
        return False

    def _count(self, spec: RequestSpec, missing: int, start: int, index: int) -> bool:
        if missing == 0:
            return self._request(index + 1)
        for position in range(start, len(self.candidates)):
            undo = self._try(spec, self.candidates[position])
            if isinstance(undo, Rejection):
                continue
            if self._count(spec, missing - 1, position + 1, index):
                return True
            undo()
        return False

    def _all(self, spec: RequestSpec, devices: list[Candidate], position: int, index: int) -> bool:
        if position == len(devices):
            return self._request(index + 1)
        undo = self._try(spec, devices[position])
        if isinstance(undo, Rejection):
            return False
        if self._all(spec, devices, position + 1, index):
            return True
        undo()
        return False

    def _counts_for_all(self, spec: RequestSpec, device: Candidate) -> bool:
        """Allocation mode All takes every matching device whose capacity could fit. Like
        the scheduler, a device short of remaining capacity (shares of other claims)
        still counts, and then fails the request."""
        return (self.matches(spec, device)
                and self._capacity(spec, device, remaining=False)[1] is None)

    # -- one device

    def _try(self, spec: RequestSpec, device: Candidate) -> Undo | Rejection:
        self._steps += 1
        if self._steps > MAX_STEPS:
            raise AllocationError(
                f"claim {self.label}: gave up after {MAX_STEPS} allocation attempts"
            )
        if not self.matches(spec, device):
            return Rejection(device.name, "does not match the class and request selectors")
        if len(self.picks) >= MAX_RESULTS:
            return Rejection(
                device.name, f"the claim already has {MAX_RESULTS} results (API limit)"
            )
        taint = blocking_taint(device, spec)
        if taint is not None:
            return Rejection(device.name, f"has taint {_taint(taint)}, not tolerated")
        rejection = self._availability(spec, device) or self._constraint_rejection(spec, device)
        if rejection:
            return rejection
        consumed, problem = self._capacity(spec, device)
        if problem:
            return problem
        return self._take(spec, device, consumed)

    def _availability(self, spec: RequestSpec, device: Candidate) -> Rejection | None:
        # Even admin access does not get an exclusive device twice within one claim.
        if not device.shared and any(p.device is device for p in self.picks):
            return Rejection(device.name, "already allocated in this claim")
        if not spec.admin_access:  # admin access may use a device other claims hold
            owner = self.usage.exclusive.get(device.key)
            if owner is not None:
                return Rejection(device.name, f"in use by claim {owner}")
            if not device.shared and self.usage.in_use(device):
                return Rejection(device.name, "in use by shares of other claims")
        # Counters are checked for admin access too (the scheduler skips only the in-use
        # check for it), and charged again for a device in use unless it is a further
        # share of a multi-allocatable one, as the scheduler does.
        if not (device.shared and self.usage.in_use(device)):
            problems = self.usage.counters_left(device)
            if problems:
                return Rejection(device.name, "; ".join(problems))
        return None

    def _constraint_rejection(self, spec: RequestSpec, device: Candidate) -> Rejection | None:
        for constraint, values in zip(self.constraints, self._values, strict=True):
            if not constraint.applies_to(spec):
                continue
            value = _attribute_value(device, constraint.attribute)
            if value is None:
                return Rejection(device.name, f"lacks attribute {constraint.attribute}")
            # Values compare as sets (DRAListTypeAttributes, on in 1.37's e2e): a scalar is
            # a set of one; matchAttribute needs all chosen sets to meet, distinctAttribute
            # a set disjoint from each chosen one.
            if constraint.kind == "matchAttribute" and values and not value.intersection(*values):
                return Rejection(
                    device.name,
                    f"matchAttribute {constraint.attribute}: {_shown(value)} shares no value "
                    f"with {_shown(frozenset.intersection(*values))} of the devices already chosen",
                )
            if constraint.kind == "distinctAttribute" and any(value & v for v in values):
                return Rejection(
                    device.name,
                    f"distinctAttribute {constraint.attribute}: {_shown(value)} already chosen",
                )
        return None

    def _capacity(
        self, spec: RequestSpec, device: Candidate, remaining: bool = True
    ) -> tuple[dict[str, Fraction] | None, Rejection | None]:
        """(consumption of every capacity for shared devices, or the reason it doesn't fit);
        `remaining=False` ignores what other shares consume."""
        capacity = device.spec.get("capacity") or {}
        requested: dict[str, Any] = {}
        for name, amount in spec.capacity.items():
            published = device.capacity_name(name)
            if published is None:
                return None, Rejection(device.name, f"has no capacity {name!r}")
            requested[published] = amount
        if not device.shared:
            for name, amount in requested.items():
                if parse_quantity(amount) > parse_quantity(capacity[name]["value"]):
                    return None, Rejection(
                        device.name, f"{name} {capacity[name]['value']} is less than {amount}"
                    )
            return None, None
        consumed: dict[str, Fraction] = {}
        for name, entry in capacity.items():
            amount = consumed_amount(entry, requested.get(name))
            if isinstance(amount, NoFit):
                return None, Rejection(device.name, f"{name}: {amount.reason}")
            consumed[name] = amount
        # Admin access is held to the remaining capacity too, as in the scheduler.
        for name, amount in consumed.items() if remaining else ():
            rejection = self._capacity_left(device, name, amount)
            if rejection:
                return None, rejection
        return consumed, None

    def _capacity_left(self, device: Candidate, name: str, amount: Fraction) -> Rejection | None:
        total = parse_quantity(device.spec["capacity"][name]["value"])
        used = self.usage.consumed.get(device.key, {}).get(name, Fraction(0))
        if used + amount <= total:
            return None
        text = f"{human_quantity(used)} of {human_quantity(total)} used"
        return Rejection(device.name, f"{name}: {text}", capacity=name, amount=amount, used=text)

    def _take(
        self, spec: RequestSpec, device: Candidate, consumed: dict[str, Fraction] | None
    ) -> Undo:
        counted = not spec.admin_access
        if counted:
            self.usage.take(device, consumed, f"{self.label} (this claim)")
        pushed = []
        for position, constraint in enumerate(self.constraints):
            if constraint.applies_to(spec):
                value = _attribute_value(device, constraint.attribute)
                assert value is not None  # _try rejected a device without it before
                self._values[position].append(value)
                pushed.append(position)
        share_id = self.new_share_id() if device.shared else None
        self.picks.append(Pick(spec, device, consumed, share_id))

        def undo() -> None:
            self._undo.pop()
            self.picks.pop()
            for position in pushed:
                self._values[position].pop()
            if counted:
                self.usage.give_back(device, consumed)

        self._undo.append(undo)
        return undo


AttributeSet = frozenset[tuple[str, Any]]
"""An attribute's values as (kind, value) pairs: one for a scalar, each item of a list."""


def _attribute_value(device: Candidate, name: str) -> AttributeSet | None:
    entry = device.attribute(name)
    if not entry:
        return None
    kind, value = next(iter(entry.items()))
    if isinstance(value, list):
        return frozenset((kind.removesuffix("s"), item) for item in value)
    return frozenset({(kind, value)})


def _shown(values: AttributeSet) -> str:
    items = sorted(repr(v) for _, v in values)
    return items[0] if len(items) == 1 else f"[{', '.join(items)}]"


def _taint(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key', '')}{value}:{taint.get('effect', '')}"
