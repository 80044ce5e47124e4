"""copy_json: the deep copy a prepare makes of device attributes and container edits."""

from __future__ import annotations

import copy

from simdra._driver.claims.plan.cdi import copy_json


def test_a_copy_equals_deepcopy_keeps_types_and_shares_no_container() -> None:
    original = {"env": ["A=1"], "mounts": ({"path": "/x", "options": ["ro"]},),
                "attributes": {"n": 1, "f": 0.5, "b": True, "none": None}}
    copied = copy_json(original)
    assert copied == copy.deepcopy(original)
    assert type(copied["mounts"]) is tuple and type(copied["env"]) is list
    copied["env"].append("B=2")
    copied["mounts"][0]["options"].append("rw")
    copied["attributes"]["n"] = 2
    assert original == {"env": ["A=1"], "mounts": ({"path": "/x", "options": ["ro"]},),
                        "attributes": {"n": 1, "f": 0.5, "b": True, "none": None}}


def test_other_values_are_deep_copied_too() -> None:
    original = {"set": {1, 2}}
    copied = copy_json(original)
    copied["set"].add(3)
    assert original == {"set": {1, 2}}
