"""The capacity a claim's requests ask for (`exactly.capacity.requests`, and each
`firstAvailable` subrequest's), as kube-apiserver 1.38 checks it on create: each name a
qualified name (reported on the map's path), at most MAX_CAPACITY_REQUIREMENTS entries,
no negative amount (reported on the entry's path). 1.37 and older check none of this.
"""

from __future__ import annotations

from typing import Any

from simdra._driver.core.quantity import QuantityError, parse_quantity
from simdra._driver.testing.apiserver.validation import formats
from simdra._driver.testing.apiserver.validation.field import FieldError, invalid, too_many

MAX_CAPACITY_REQUIREMENTS = 32  # k8s.io/api resource/v1 MaxCapacityRequirements (1.38)
SINCE_MINOR = 38


def capacity_request_errors(requests: Any, path: str, minor: int) -> list[FieldError]:
    """The errors of every request's (and subrequest's) capacity under `path`, the
    claim's `devices.requests`, for a server of minor release `minor`."""
    if minor < SINCE_MINOR or not isinstance(requests, list):
        return []
    errors: list[FieldError] = []
    for i, request in enumerate(requests):
        if not isinstance(request, dict):
            continue
        errors += _asked(request.get("exactly"), f"{path}[{i}].exactly")
        for j, sub in enumerate(request.get("firstAvailable") or []):
            errors += _asked(sub, f"{path}[{i}].firstAvailable[{j}]")
    return errors


def _asked(request: Any, path: str) -> list[FieldError]:
    capacity = request.get("capacity") if isinstance(request, dict) else None
    asked = capacity.get("requests") if isinstance(capacity, dict) else None
    if not isinstance(asked, dict):
        return []
    where = f"{path}.capacity.requests"
    if len(asked) > MAX_CAPACITY_REQUIREMENTS:
        return [too_many(where, len(asked), MAX_CAPACITY_REQUIREMENTS)]
    errors = [e for name in asked for e in formats.qualified_name(name, where)]
    for name, amount in asked.items():
        try:
            negative = parse_quantity(str(amount)) < 0
        except QuantityError:
            continue  # the schema check reports a quantity that does not parse
        if negative:
            errors.append(invalid(f"{where}[{name}]", amount,
                                  "must be greater than or equal to 0"))
    return errors
