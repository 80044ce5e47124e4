"""Why a claim could not be allocated, in one sentence a test log can show as is.

After the search fails, each request is tried on its own: the first one that cannot be
satisfied even alone is explained device by device. When every request fits alone, the
requests only conflict with each other (constraints, or competing for the same devices).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from simdra._driver.testing.allocation.format import human_quantity
from simdra._driver.testing.allocation.pools import Candidate
from simdra._driver.testing.allocation.requests import Constraint, RequestSpec
from simdra._driver.testing.allocation.search import MAX_RESULTS, Rejection, Search
from simdra._driver.testing.allocation.taken import Usage

MAX_LISTED = 6


def explain(
    claim: Mapping[str, Any],
    requests: list[list[RequestSpec]],
    constraints: list[Constraint],
    candidates: list[Candidate],
    usage: Usage,
    node: str | None,
) -> str:
    """The reason (without the claim prefix) that the claim does not fit on `node`."""
    if not candidates:
        where = f"node {node}" if node else "all nodes"
        return f"no devices in complete pools are published for {where}"
    for alternatives in requests:
        alone = Search(claim, [alternatives], [], candidates, usage)
        if alone.run() is None:
            return f"request {alternatives[0].request}: {_request(alone, alternatives)}"
    names = ", ".join(alternatives[0].request for alternatives in requests)
    if constraints:
        kinds = "; ".join(f"{c.kind} {c.attribute}" for c in constraints)
        return f"requests {names} fit one by one but not together under constraints ({kinds})"
    return f"requests {names} fit one by one but not together (they compete for devices)"


def _request(search: Search, alternatives: list[RequestSpec]) -> str:
    if len(alternatives) == 1:
        return _alternative(search, alternatives[0])
    reasons = "; ".join(
        f"{spec.result_name}: {_alternative(search, spec)}" for spec in alternatives
    )
    return f"no subrequest can be satisfied ({reasons})"


def _alternative(search: Search, spec: RequestSpec) -> str:
    matching = [d for d in search.candidates if search.matches(spec, d)]
    if not matching:
        extra = " and the request's selectors" if _has_own_selectors(spec) else ""
        return (
            f"no device matches device class {spec.class_name}{extra} "
            f"({len(search.candidates)} devices checked)"
        )
    needed = len(matching) if spec.mode == "All" else spec.count
    if needed > MAX_RESULTS:
        return f"needs {needed} devices, more than the {MAX_RESULTS} results a claim may hold"
    rejections = [r for r in (search.rejection(spec, d) for d in matching) if r is not None]
    available = len(matching) - len(rejections)
    capacity_names = {r.capacity for r in rejections}
    single = spec.mode == "ExactCount" and spec.count == 1
    if single and available == 0 and len(capacity_names) == 1 and None not in capacity_names:
        amount = human_quantity(rejections[0].amount or 0)
        listed = _list(rejections, lambda r: r.used)
        return (
            f"no device of class {spec.class_name} has {amount} of "
            f"{rejections[0].capacity} left{listed}"
        )
    wanted = f"all {len(matching)}" if spec.mode == "All" else str(spec.count)
    return (
        f"needs {wanted} device(s) of class {spec.class_name}, {available} of "
        f"{len(matching)} matching devices available{_list(rejections, lambda r: r.reason)}"
    )


def _list(rejections: list[Rejection], text: Callable[[Rejection], str]) -> str:
    """` (dev: why; ...)` or nothing."""
    if not rejections:
        return ""
    shown = [f"{r.device}: {text(r)}" for r in rejections[:MAX_LISTED]]
    if len(rejections) > MAX_LISTED:
        shown.append(f"and {len(rejections) - MAX_LISTED} more")
    return f" ({'; '.join(shown)})"


def _has_own_selectors(spec: RequestSpec) -> bool:
    class_selectors = (spec.device_class.get("spec") or {}).get("selectors") or []
    return len(spec.selectors) > len(class_selectors)
