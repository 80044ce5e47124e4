"""List-type attributes (KEP-5491, DRAListTypeAttributes): a NIC near two NUMA nodes
publishes the standard numaNode as a list with `--list-attributes`, and as its physical
node (the first item) without it, because a server without the gate refuses the list.
The container learns every node it is near."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simdra import NUMA_NODE, numa_span_attributes, scalar_attributes
from simdra._driver.builtins import builtin_kinds
from simdra._driver.claims.plan.config import rules_for
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.cli import _parser
from simdra._driver.cli.run import config_from_args
from simdra._driver.core.validation import validate_device
from simdra._driver.devices.backend import FakeBackend
from simdra._driver.devices.live import LiveDevices
from simdra._driver.devices.model import Device, Inventory, Pool
from simdra._driver.devices.profiles import profile_inventory

DRIVER = "dra.example.com"
NODE = "node-a"
CLAIM_UID = "aaaaaaaa-0000-4000-8000-000000000001"


def _nics(count: int = 4) -> dict[str, Device]:
    inventory = profile_inventory("gpu,nic-multi-numa", DRIVER, NODE, count, kinds=builtin_kinds())
    return {d.name: d for _, d in inventory.devices() if d.name.startswith("nic-")}


def test_a_spanning_nic_publishes_both_nodes_of_its_socket_physical_first():
    nics = _nics()

    assert [nics[f"nic-{i}"].spec["attributes"][NUMA_NODE] for i in range(4)] == [
        {"ints": [0, 1]}, {"ints": [2, 3]}, {"ints": [0, 1]}, {"ints": [2, 3]}]
    assert all(validate_device(n.to_json(), "d") == [] for n in nics.values())


def test_one_node_is_a_plain_int_and_no_affinity_is_no_attribute():
    assert numa_span_attributes([1]) == {NUMA_NODE: {"int": 1}}
    assert numa_span_attributes([-1]) == {}
    assert numa_span_attributes([3, 3, 2]) == {NUMA_NODE: {"ints": [3, 2]}}


def test_without_the_gate_lists_fold_to_their_first_item_and_nothing_else_changes():
    inventory = profile_inventory("gpu,nic-multi-numa", DRIVER, NODE, 2, kinds=builtin_kinds())

    folded = {d.name: d for _, d in scalar_attributes(inventory).devices()}

    assert folded["nic-1"].spec["attributes"][NUMA_NODE] == {"int": 2}
    assert folded["gpu-1"] is inventory.device(NODE, "gpu-1")  # no lists: the same object
    assert inventory.device(NODE, "nic-1").spec["attributes"][NUMA_NODE] == {"ints": [2, 3]}
    plain = Inventory(pools=(Pool(NODE, (Device(spec={"name": "x"}),)),))
    assert scalar_attributes(plain) is plain


@pytest.mark.parametrize(("flag", "expected"), [(None, {"int": 2}), ("true", {"ints": [2, 3]})])
def test_the_flag_decides_what_the_plugin_publishes(flag, expected):
    argv = ["run", "--node-name", NODE] + (["--list-attributes", flag] if flag else [])
    config = config_from_args(_parser("run").parse_args(argv))
    backend = FakeBackend("nic-multi-numa", DRIVER, NODE, 2, kinds=builtin_kinds())

    live = LiveDevices(backend, DRIVER, on_change=lambda view: None,
                       shape=None if config.list_attributes else scalar_attributes)

    published = live.view.published.device(NODE, "nic-1")
    assert published is not None and published.spec["attributes"][NUMA_NODE] == expected


def test_the_container_learns_every_node_the_device_is_near(tmp_path: Path):
    source = StaticClaimSource()
    source.put({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"namespace": "default", "name": "net", "uid": CLAIM_UID},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "nic", "driver": DRIVER, "pool": NODE, "device": "nic-1",
             "shareID": "11111111-2222-4333-8444-555555555555",
             "consumedCapacity": {"bandwidth": "1M"}}], "config": []}}},
    })
    inventory = profile_inventory("nic-multi-numa", DRIVER, NODE, 2, kinds=builtin_kinds())
    preparer = Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data",
                        rules=rules_for(builtin_kinds()))

    answer = preparer.prepare([ClaimRef("default", "net", CLAIM_UID)])[CLAIM_UID]

    assert answer.error == ""
    [spec] = (tmp_path / "cdi").glob("*.json")
    env = [e for d in json.loads(spec.read_text())["devices"]
           for e in d["containerEdits"].get("env", [])]
    assert any(e.endswith("_NUMA_NODE=2,3") for e in env), env


def test_a_device_reads_list_and_scalar_attributes_alike():
    nic = _nics()["nic-1"]
    folded = {d.name: d for _, d in scalar_attributes(
        profile_inventory("nic-multi-numa", DRIVER, NODE, 2, kinds=builtin_kinds())
    ).devices()}["nic-1"]

    assert nic.attribute_values(NUMA_NODE) == [2, 3]
    assert folded.attribute_values(NUMA_NODE) == [2]
    assert nic.attribute_values("nope") == []
