"""Quantities a real API server cannot decode.

A real server parses every `resource.Quantity` while it decodes the request body, before
any validation: a quantity that does not parse fails the whole request with 400 BadRequest
("... cannot be handled as a ResourceClaim: quantities must match ..."), not with a 422
naming the field. The stand-in keeps bodies as JSON, so it looks for the quantity fields
of each kind here and answers the same 400.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from simdra._driver.testing.apiserver.errors import bad_request

# The server's own error text quotes this pattern; a match must also end in a known suffix.
_PATTERN = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_QUANTITY = re.compile(
    r"^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)


def _decodes(value: Any) -> bool:
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return True
    return isinstance(value, str) and bool(_QUANTITY.match(value.strip()))


def _items(value: Any) -> Iterator[Any]:
    if isinstance(value, list):
        yield from value
    elif isinstance(value, dict):
        yield from value.values()


def _maps(parent: Any, *keys: str) -> Iterator[Any]:
    """Every value under `parent` along `keys`, where '*' walks a list or a map."""
    if not keys:
        yield parent
        return
    key, rest = keys[0], keys[1:]
    if key == "*":
        for item in _items(parent):
            yield from _maps(item, *rest)
    elif isinstance(parent, dict) and key in parent:
        yield from _maps(parent[key], *rest)


def _slice_quantities(obj: Any) -> Iterator[Any]:
    spec = obj.get("spec")
    capacity = list(_maps(spec, "devices", "*", "capacity", "*"))
    yield from (c.get("value") for c in capacity if isinstance(c, dict))
    for policy in (c.get("requestPolicy") for c in capacity if isinstance(c, dict)):
        yield from _maps(policy, "default")
        yield from _maps(policy, "validValues", "*")
        yield from _maps(policy, "validRange", "*")
    yield from _maps(spec, "sharedCounters", "*", "counters", "*", "value")
    yield from _maps(spec, "devices", "*", "consumesCounters", "*", "counters", "*", "value")


def _claim_spec_quantities(spec: Any) -> Iterator[Any]:
    for request in _maps(spec, "devices", "requests", "*"):
        yield from _maps(request, "exactly", "capacity", "requests", "*")
        yield from _maps(request, "firstAvailable", "*", "capacity", "requests", "*")


def _quantities(kind: str, obj: dict[str, Any]) -> Iterator[Any]:
    if kind == "ResourceSlice":
        yield from _slice_quantities(obj)
    elif kind == "ResourceClaim":
        yield from _claim_spec_quantities(obj.get("spec"))
        results = _maps(obj.get("status"), "allocation", "devices", "results", "*")
        for result in results:
            yield from _maps(result, "consumedCapacity", "*")
    elif kind == "ResourceClaimTemplate":
        yield from _claim_spec_quantities((obj.get("spec") or {}).get("spec"))


def check_decodable(kind: str, obj: dict[str, Any]) -> None:
    """Raise 400 BadRequest, as a real server's decoder does, for an unparsable quantity."""
    if not any(not _decodes(q) for q in _quantities(kind, obj)):
        return
    raise bad_request(
        f'{kind} in version "v1" cannot be handled as a {kind}: quantities must match the '
        f"regular expression '{_PATTERN}'"
    )
