"""A slice with list-valued attributes sent to a server without DRAListTypeAttributes: the
server drops the lists and refuses the slice (the attribute is left without a value).
The publisher's log line says which gate, and how to do without it (the default, no
--list-attributes, folds lists to their first item and is published)."""

from __future__ import annotations

import logging

from simdra._driver.devices.standard_attributes import NUMA_NODE, scalar_attributes

from .builders import gpu, inventory, pool
from .test_publisher import slices, wait_until


def _spanning() -> dict:
    device = gpu(0)
    device["attributes"][NUMA_NODE] = {"ints": [2, 3]}
    return device


def test_a_refused_list_names_the_gate_and_the_flag(server, node, start, caplog):
    server.feature_gates["DRAListTypeAttributes"] = False
    caplog.set_level(logging.WARNING, logger="simdra._driver.slices")

    start(inventory(pool("a", [_spanning()])))

    assert wait_until(lambda: "DRAListTypeAttributes" in caplog.text)
    line = next(r.getMessage() for r in caplog.records if "DRAListTypeAttributes" in r.getMessage())
    assert "\n" not in line and "--list-attributes" in line and "pool 'a'" in line
    assert slices(server) == []


def test_the_folded_inventory_is_published_without_the_gate(server, node, start):
    server.feature_gates["DRAListTypeAttributes"] = False

    publisher = start(scalar_attributes(inventory(pool("a", [_spanning()]))))

    assert publisher.wait_synced(10)
    [published] = slices(server)
    assert published["spec"]["devices"][0]["attributes"][NUMA_NODE] == {"int": 2}
