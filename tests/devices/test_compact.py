"""compact(): equal parts of device specs held once, with nothing a reader could see."""

from __future__ import annotations

from simdra._driver.builtins import builtin_kinds
from simdra._driver.devices.model import Device, Inventory, Pool, compact
from simdra._driver.devices.profiles import profile_inventory


def test_nics_share_their_capacity_and_type_but_publish_the_same_specs() -> None:
    inventory = profile_inventory("nic", "dra.example.com", "node-1", 3, kinds=builtin_kinds())
    compacted = compact(inventory)
    assert compacted == inventory
    specs = [d.spec for _, d in compacted.devices()]
    assert specs[0]["capacity"] is specs[2]["capacity"]
    assert specs[0]["attributes"]["type"] is specs[1]["attributes"]["type"]
    assert specs[0]["attributes"]["uuid"] != specs[1]["attributes"]["uuid"]


def test_values_equal_in_python_but_of_other_json_types_stay_apart() -> None:
    inventory = Inventory((Pool("p", (
        Device({"name": "a", "attributes": {"x": {"int": 1}}}),
        Device({"name": "b", "attributes": {"x": {"int": True}}}),
        Device({"name": "c", "capacity": {"m": {"value": "1"}}}),
        Device({"name": "d", "capacity": {"m": {"value": 1}}}),
    )),))
    specs = [d.spec for _, d in compact(inventory).devices()]
    assert specs[1]["attributes"]["x"] == {"int": True}
    assert specs[0]["attributes"]["x"] is not specs[1]["attributes"]["x"]
    assert specs[3]["capacity"]["m"]["value"] == 1


def test_a_copy_changed_by_one_reader_leaves_the_other_devices_alone() -> None:
    compacted = compact(profile_inventory("nic", "dra.example.com", "node-1", 2,
                                          kinds=builtin_kinds()))
    first, second = (d for _, d in compacted.devices())
    changed = first.to_json()
    changed["capacity"]["bandwidth"]["value"] = "1G"
    assert second.spec["capacity"]["bandwidth"]["value"] == "10G"
