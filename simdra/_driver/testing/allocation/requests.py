"""A claim's requests, subrequests and constraints in one normalized shape.

`exactly` requests and each `firstAvailable` subrequest become a `RequestSpec`; a
request is the ordered list of its alternatives (one for `exactly`). Class and request
selectors are compiled up front, so an unsupported expression fails before any search.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simdra._driver.testing.allocation.cel import Selector, UnsupportedExpression, compile_selector
from simdra._driver.testing.allocation.errors import AllocationError
from simdra._driver.testing.allocation.pools import Candidate

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class RequestSpec:
    """One way to satisfy a request: an `exactly` request or one subrequest."""

    request: str  # the claim's request name
    subrequest: str | None
    class_name: str
    device_class: Mapping[str, Any]
    selectors: tuple[Selector, ...]  # class selectors first, then the request's
    mode: str  # ExactCount or All
    count: int
    admin_access: bool
    capacity: Mapping[str, Any]  # capacity.requests
    tolerations: tuple[Mapping[str, Any], ...]

    @property
    def result_name(self) -> str:
        """The name allocation results use: `req` or `req/sub`."""
        return f"{self.request}/{self.subrequest}" if self.subrequest else self.request


@dataclass(frozen=True)
class Constraint:
    """matchAttribute or distinctAttribute over some (or all) requests."""

    kind: str  # "matchAttribute" or "distinctAttribute"
    attribute: str
    requests: frozenset[str]  # empty = all requests

    def applies_to(self, spec: RequestSpec) -> bool:
        """True when a device picked for `spec` counts for this constraint."""
        return not self.requests or bool({spec.request, spec.result_name} & self.requests)


def parse_requests(
    claim: Mapping[str, Any], classes: Mapping[str, Mapping[str, Any]]
) -> list[list[RequestSpec]]:
    """Each claim request as its list of alternatives, validated."""
    requests = (claim.get("spec", {}).get("devices") or {}).get("requests") or []
    if not requests:
        raise AllocationError(f"claim {claim_label(claim)}: has no device requests")
    return [_alternatives(claim, request, classes) for request in requests]


def parse_constraints(claim: Mapping[str, Any]) -> list[Constraint]:
    """The claim's constraints; an unknown kind is an error rather than ignored."""
    found = []
    for index, item in enumerate((claim["spec"].get("devices") or {}).get("constraints") or []):
        kinds = [k for k in ("matchAttribute", "distinctAttribute") if item.get(k)]
        if len(kinds) != 1:
            raise AllocationError(
                f"claim {claim_label(claim)}: constraint #{index} must set exactly one of "
                "matchAttribute or distinctAttribute"
            )
        found.append(Constraint(kinds[0], item[kinds[0]], frozenset(item.get("requests") or [])))
    return found


def blocking_taint(candidate: Candidate, spec: RequestSpec) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint of the device the request does not tolerate."""
    taints: list[Mapping[str, Any]] = candidate.spec.get("taints") or []
    for taint in taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not any(
            tolerates(t, taint) for t in spec.tolerations
        ):
            return taint
    return None


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one DeviceToleration tolerates one DeviceTaint (core/v1 toleration rules)."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def claim_label(claim: Mapping[str, Any]) -> str:
    """`namespace/name` of a claim, for messages."""
    meta = claim.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _alternatives(
    claim: Mapping[str, Any], request: Mapping[str, Any], classes: Mapping[str, Any]
) -> list[RequestSpec]:
    name = request.get("name", "")
    if request.get("exactly") and request.get("firstAvailable"):
        raise AllocationError(
            f"claim {claim_label(claim)}: request {name}: sets both exactly and firstAvailable"
        )
    if request.get("exactly"):
        return [_spec(claim, name, None, request["exactly"], classes)]
    subrequests = request.get("firstAvailable") or []
    if not subrequests:
        raise AllocationError(
            f"claim {claim_label(claim)}: request {name}: needs exactly or firstAvailable"
        )
    return [_spec(claim, name, sub.get("name", ""), sub, classes) for sub in subrequests]


def _spec(
    claim: Mapping[str, Any],
    name: str,
    subrequest: str | None,
    body: Mapping[str, Any],
    classes: Mapping[str, Any],
) -> RequestSpec:
    label = f"claim {claim_label(claim)}: request {f'{name}/{subrequest}' if subrequest else name}"
    class_name = body.get("deviceClassName") or ""
    device_class = classes.get(class_name)
    if device_class is None:
        raise AllocationError(f"{label}: device class {class_name!r} not found")
    mode = body.get("allocationMode") or "ExactCount"
    count = int(body.get("count") or (1 if mode == "ExactCount" else 0))
    if mode not in ("ExactCount", "All") or (mode == "ExactCount" and count < 1):
        raise AllocationError(f"{label}: unsupported allocationMode {mode!r} / count {count}")
    selectors = _selectors(f"device class {class_name}", device_class.get("spec", {}))
    selectors += _selectors(label, body)
    return RequestSpec(
        request=name,
        subrequest=subrequest,
        class_name=class_name,
        device_class=device_class,
        selectors=selectors,
        mode=mode,
        count=count,
        admin_access=bool(body.get("adminAccess")),
        capacity=(body.get("capacity") or {}).get("requests") or {},
        tolerations=tuple(body.get("tolerations") or ()),
    )


def _selectors(owner: str, body: Mapping[str, Any]) -> tuple[Selector, ...]:
    compiled = []
    for index, selector in enumerate(body.get("selectors") or []):
        expression = (selector.get("cel") or {}).get("expression")
        if expression is None:
            raise UnsupportedExpression(f"{owner}: selector #{index} has no CEL expression")
        try:
            compiled.append(compile_selector(expression))
        except UnsupportedExpression as error:
            raise UnsupportedExpression(f"{owner}: selector #{index}: {error}") from None
    return tuple(compiled)
