"""DeviceTaintRules, applied as the scheduler applies them: a rule's taint counts as if
the driver had published it in the device's own `taints` (GA in 1.37). Used by the
harness's allocator and by `kubectl dra`.

A rule's `deviceSelector` matches by `driver`, `pool` and `device` (each optional: an
empty selector matches every device; 1.34's `deviceClassName` and `selectors` were
dropped from the API in 1.35 and are not read). Pure: slices in, slices out.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

JSON = dict[str, Any]
Slice = TypeVar("Slice", bound=Mapping[str, Any])  # a ResourceSlice object


def with_rule_taints(slices: Iterable[Slice], rules: Sequence[Mapping[str, Any]]) -> list[Slice]:
    """`slices`, each device given the taints of the rules that select it (after its
    own); the slices without a selected device are returned as they are."""
    specs = [rule.get("spec", rule) for rule in rules]
    return [_tainted(s, specs) if specs else s for s in slices]


def _tainted(slice_: Slice, rules: Sequence[Mapping[str, Any]]) -> Slice:
    spec = slice_.get("spec") or {}
    driver, pool = spec.get("driver"), (spec.get("pool") or {}).get("name")
    added = {index: taints for index, device in enumerate(spec.get("devices") or ())
             if (taints := _rule_taints(rules, driver, pool, device.get("name")))}
    if not added:
        return slice_
    copied: JSON = copy.deepcopy(dict(slice_))
    for index, taints in added.items():
        device = copied["spec"]["devices"][index]
        device["taints"] = [*(device.get("taints") or ()), *taints]
    return cast(Slice, copied)


def _rule_taints(rules: Sequence[Mapping[str, Any]], driver: str | None, pool: str | None,
                 device: str | None) -> list[JSON]:
    return [dict(rule["taint"]) for rule in rules
            if rule.get("taint") and _selects(rule.get("deviceSelector"), driver, pool, device)]


def _selects(selector: Mapping[str, Any] | None, driver: str | None, pool: str | None,
             device: str | None) -> bool:
    if selector is None:  # "without a selector, no devices are matched"
        return False
    wanted = {"driver": driver, "pool": pool, "device": device}
    return all(selector.get(field) in (None, value) for field, value in wanted.items())
