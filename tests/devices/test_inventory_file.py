"""Inventory files: what a user writes is what gets published, or a start-up error that
names the device and the rule."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from simdra._driver.builtins import builtin_kinds
from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.inventory_file import InventoryFileError, load_inventory_file

NIC = {
    "name": "nic-0",
    "allowMultipleAllocations": True,
    "attributes": {"type": {"string": "nic"}},
    "capacity": {"bandwidth": {"value": "10G", "requestPolicy": {
        "default": "1M", "validRange": {"min": "1M", "step": "8"}}}},
}


def _write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def test_devices_are_kept_exactly_as_written(tmp_path: Path) -> None:
    path = _write(tmp_path, {"pools": [{"name": "rack-1", "devices": [NIC]}]})

    inventory = load_inventory_file(path)

    [pool] = inventory.pools
    assert pool.name == "rack-1"
    assert [d.to_json() for d in pool.devices] == [NIC]


def test_node_placeholder_makes_pool_names_unique_per_node(tmp_path: Path) -> None:
    path = _write(tmp_path, {"pools": [{"name": "{node}-nics", "devices": [NIC]}]})

    backend = FakeBackend(str(path), "dra.example.com", "worker-7", 8, kinds=builtin_kinds())

    assert [p.name for p in backend.discover().pools] == ["worker-7-nics"]


@pytest.mark.parametrize(("device", "expected"), [
    ({"name": "Bad_Name"}, "Bad_Name"),
    ({"name": "gpu-0", "attributes": {"model": {"string": "x" * 65}}}, "64"),
    ({"name": "nic-1", "capacity": {"bandwidth": {
        "value": "10G", "requestPolicy": {"default": "1M"}}}}, "allowMultipleAllocations"),
    ({"name": "nic-2", "allowMultipleAllocations": True, "capacity": {"bandwidth": {
        "value": "10G", "requestPolicy": {"default": "1500k",
                                          "validRange": {"min": "1M", "step": "1M"}}}}},
     "nic-2"),
])
def test_invalid_device_is_reported_with_its_name_and_rule(
        tmp_path: Path, device: dict, expected: str) -> None:
    path = _write(tmp_path, {"pools": [{"name": "p", "devices": [{"name": "fine"}, device]}]})

    with pytest.raises(InventoryFileError) as error:
        load_inventory_file(path)

    message = str(error.value)
    assert str(path) in message and "pools[0].devices[1]" in message and expected in message


def test_duplicate_device_and_pool_names_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, {"pools": [
        {"name": "p", "devices": [{"name": "a"}, {"name": "a"}]},
        {"name": "p", "devices": []},
    ]})

    with pytest.raises(InventoryFileError) as error:
        load_inventory_file(path)

    assert "duplicate device name" in str(error.value)
    assert "duplicate pool name 'p'" in str(error.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("pools: [ {name: p, devices: [ {name: a} ]", "cannot read"),
    ("devices: []", "top level must be a map with 'pools'"),
    ("pools: [ {name: p, colour: red} ]", "unknown keys ['colour']"),
    ("pools: [ {name: 'Bad Pool'} ]", "pools[0].name"),
])
def test_malformed_files_name_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)

    with pytest.raises(InventoryFileError) as error:
        load_inventory_file(path)

    assert expected in str(error.value)


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InventoryFileError, match="cannot read"):
        load_inventory_file(tmp_path / "absent.yaml")


def test_pool_options_become_the_pools_slice_fields(tmp_path: Path) -> None:
    seat = {"name": "seat-0", "attributes": {"type": {"string": "license"}}}
    path = _write(tmp_path, {"pools": [
        {"name": "seats", "skipNodeOperations": ["*"], "devices": [seat]},
        {"name": "gpus", "partitionTypeAttribute": "dra.example.com/profile", "devices": [NIC]},
    ]})

    seats, gpus = load_inventory_file(path).pools

    assert [d.skip_node_operations for d in seats.devices] == [("*",)]
    assert seats.partition_type_attribute is None
    assert gpus.partition_type_attribute == "dra.example.com/profile"
    assert [d.skip_node_operations for d in gpus.devices] == [()]


@pytest.mark.parametrize(("options", "expected"), [
    ({"skipNodeOperations": ["NodePrepareResources"]},
     "NodePrepareResources cannot be skipped unless NodeUnprepareResources is also skipped"),
    ({"skipNodeOperations": ["Attach"]}, 'Unsupported value: "Attach"'),
    ({"partitionTypeAttribute": "profile"}, "must be <domain>/<name>"),
])
def test_bad_pool_options_are_refused_naming_the_pool(
        tmp_path: Path, options: dict[str, object], expected: str) -> None:
    path = _write(tmp_path, {"pools": [{"name": "p", "devices": [NIC], **options}]})

    with pytest.raises(InventoryFileError) as err:
        load_inventory_file(path)

    assert "pools[0] (p)" in str(err.value) and expected in str(err.value)


def test_a_partition_type_in_the_drivers_domain_follows_the_driver_name(tmp_path: Path) -> None:
    path = _write(tmp_path, {"pools": [
        {"name": "p", "partitionTypeAttribute": "{driver}/profile", "devices": [NIC]}]})

    [pool] = load_inventory_file(path, "node-1", "gpu.example.com").pools

    assert pool.partition_type_attribute == "gpu.example.com/profile"
