"""DeviceTaintRules as the scheduler applies them: by driver, pool and device, each
optional; an empty selector matches every device, a missing one none."""

from __future__ import annotations

from typing import Any

import pytest

from simdra._driver.core.taint_rules import with_rule_taints

TAINT = {"key": "example.com/drain", "effect": "NoSchedule"}
OWN = {"key": "example.com/ecc", "effect": "NoExecute"}


def _slice(driver: str, pool: str, *names: str) -> dict[str, Any]:
    devices = [{"name": n, **({"taints": [OWN]} if n == "own" else {})} for n in names]
    return {"spec": {"driver": driver, "pool": {"name": pool}, "devices": devices}}


SLICES = [_slice("a.example.com", "p1", "d0", "own"), _slice("b.example.com", "p1", "d0")]


def _taints(slices: list[dict[str, Any]]) -> dict[str, list[str]]:
    return {f"{s['spec']['driver']}/{d['name']}": [t["key"] for t in d.get("taints", [])]
            for s in slices for d in s["spec"]["devices"]}


@pytest.mark.parametrize(("selector", "tainted"), [
    ({}, {"a.example.com/d0", "a.example.com/own", "b.example.com/d0"}),
    ({"driver": "a.example.com"}, {"a.example.com/d0", "a.example.com/own"}),
    ({"pool": "p1", "device": "d0"}, {"a.example.com/d0", "b.example.com/d0"}),
    ({"driver": "b.example.com", "device": "own"}, set()),
    (None, set()),
])
def test_a_rule_taints_the_devices_its_selector_names(selector, tainted) -> None:
    rule = {"spec": {"taint": TAINT, **({} if selector is None else
                                        {"deviceSelector": selector})}}
    result = _taints(with_rule_taints(SLICES, [rule]))

    assert {name for name, keys in result.items() if TAINT["key"] in keys} == tainted
    assert result["a.example.com/own"][0] == OWN["key"]  # the device's own taint first


def test_the_slices_given_are_left_as_they_were() -> None:
    before = _taints(SLICES)
    with_rule_taints(SLICES, [{"spec": {"deviceSelector": {}, "taint": TAINT}}])

    assert _taints(SLICES) == before
    assert with_rule_taints(SLICES, [])[0] is SLICES[0]
