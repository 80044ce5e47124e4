"""Semantic equality of ResourceSlice content, as the API server sees it (pure).

What we send and what the server stores can differ in form without differing in
meaning; none of these must count as a change, or a quiet node would keep writing:
- quantities are canonicalised by the server ("1024Mi" is stored as "1Gi");
- empty lists and maps are omitted (Go `omitempty`), and a taint's empty `value` too;
- the server sets a taint's `timeAdded` when we leave it empty, and stores times with
  second precision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from simdra._driver.core.quantity import QuantityError, parse_quantity

JSON = dict[str, Any]

# Keys whose value is a Quantity, wherever they appear inside a slice spec. Every key
# named "value" below a `capacity` entry or a counter is a quantity; attributes never use
# a "value" key (their members are int/bool/string/version/...).
_QUANTITY_KEYS = frozenset({"value", "default", "min", "max", "step", "allocationMultiplier"})
_QUANTITY_LIST_KEYS = frozenset({"validValues"})
_TIME_KEYS = frozenset({"timeAdded"})


def normalize(value: Any, key: str = "") -> Any:
    """A canonical, comparable form of a JSON value from a slice spec.

    Empty containers and None disappear, quantities become exact Fractions, times become
    whole epoch seconds. `key` is the JSON key the value was found under.
    """
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            norm = normalize(v, k)
            if not _is_empty(norm):
                out[k] = norm
        return out
    if isinstance(value, list | tuple):
        if key in _QUANTITY_LIST_KEYS:
            return [_quantity(v) for v in value]
        return [normalize(v) for v in value]
    if isinstance(value, str):
        if key in _QUANTITY_KEYS:
            return _quantity(value)
        if key in _TIME_KEYS:
            return _seconds(value)
    return value


def normalize_device(device: Mapping[str, Any]) -> JSON:
    """Canonical form of one device; a taint without `value` equals one with ""."""
    norm: JSON = normalize(device)  # a Mapping normalizes to a dict
    taints = norm.get("taints")
    if taints:
        norm["taints"] = [
            {k: v for k, v in t.items() if not (k == "value" and v == "")} for t in taints
        ]
    return norm


def devices_equal(
    desired: Sequence[Mapping[str, Any]], stored: Sequence[Mapping[str, Any]]
) -> bool:
    """True when the stored devices mean the same as the desired ones, in the same order.

    A desired taint without `timeAdded` matches a stored one with any `timeAdded`; the
    caller copies stored times into what it sends (see `with_taint_times`).
    """
    if len(desired) != len(stored):
        return False
    for want, have in zip(desired, stored, strict=True):
        if want == have:  # fast path: most devices round-trip byte for byte
            continue
        if not device_equal(want, have):
            return False
    return True


def device_equal(desired: Mapping[str, Any], stored: Mapping[str, Any]) -> bool:
    """Semantic equality of one device (see `devices_equal`)."""
    want = normalize_device(with_taint_times_one(desired, stored))
    return want == normalize_device(stored)


def with_taint_times(
    desired: Sequence[Mapping[str, Any]], stored: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """Desired devices with `timeAdded` copied from stored taints that are otherwise equal.

    Preserves when a taint was first published, so republishing an unchanged taint
    neither resets its time nor counts as a change. Devices are matched by name.
    """
    by_name = {d.get("name"): d for d in stored if d.get("taints")}
    if not by_name:
        return list(desired)
    return [with_taint_times_one(d, by_name.get(d.get("name"))) for d in desired]


def with_taint_times_one(
    desired: Mapping[str, Any], stored: Mapping[str, Any] | None
) -> Mapping[str, Any]:
    """One device with stored `timeAdded` values filled in (a copy only when needed)."""
    taints = desired.get("taints")
    if not taints or not stored or stored.get("name") != desired.get("name"):
        return desired
    old = stored.get("taints") or []
    new_taints = []
    changed = False
    for taint in taints:
        if not taint.get("timeAdded"):
            match = next((o for o in old if _same_taint(o, taint) and o.get("timeAdded")), None)
            if match is not None:
                taint = {**taint, "timeAdded": match["timeAdded"]}
                changed = True
        new_taints.append(taint)
    return {**desired, "taints": new_taints} if changed else desired


def _same_taint(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return (
        a.get("key") == b.get("key")
        and (a.get("value") or "") == (b.get("value") or "")
        and a.get("effect") == b.get("effect")
    )


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, dict | list) and not value)


def _quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except QuantityError:
        return value  # invalid: compare as text, the server will reject it anyway


def _seconds(value: str) -> Any:
    try:
        return round(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return value
