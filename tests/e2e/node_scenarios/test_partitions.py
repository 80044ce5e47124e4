"""Partitions of one physical GPU and a matchAttribute constraint on the real node, with
deploy/overlays/fake-inventory (gpu-p0 offered whole or as 4g/2g partitions that draw
on one counter set): the scheduler shares the GPU out by its counters, and each
container sees only the partition it got."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from simdra._driver.core.quantity import parse_quantity

from ..realnode import (
    Kube,
    PluginDeployment,
    allocated,
    exact_request,
    node_slices,
    require_feature,
    slice_device,
    unit_env,
    wait,
)

pytestmark = pytest.mark.overlay("fake-inventory")

GPU = "gpu.dra.example.com"
COUNTERS = "gpu-p0-counters"


def profile_is(profile: str) -> str:
    # Whole GPUs have no profile attribute: reading it would be a CEL runtime error that
    # fails the whole request, not a non-match.
    attrs = 'device.attributes["dra.example.com"]'
    return f'"profile" in {attrs} && {attrs}.profile == "{profile}"'


@pytest.fixture(scope="module")
def inventory(plugin: PluginDeployment) -> Iterator[None]:
    """The DaemonSet on fake-inventory for this file's scenarios, and its pool published
    (the fake overlay's gpu-7 gone: its gpu-4 would match the same index)."""
    for gate in ("DRAPartitionableDevices", "DRAConsumableCapacity"):  # what it publishes
        require_feature(plugin.cp, gate)
    with plugin.using("fake-inventory"):

        def published() -> bool:
            names = {
                d["name"]
                for s in node_slices(plugin.cp, plugin.node.name)
                for d in s["spec"].get("devices") or []
            }
            return "gpu-p0-4g-0" in names and "gpu-7" not in names

        wait(
            "fake-inventory pool published in place of the fake one",
            published,
            90,
            plugin.node.kubelet_log,
            plugin.describe,
        )
        yield


def test_node_partitions_side_by_side(inventory: None, kube: Kube) -> None:
    """Two pods each get a 4g.40gb partition of gpu-p0, run side by side, and each
    container sees only its own; a third (2g.20gb) would exceed the GPU's counters and
    stays Pending until one of the two goes."""
    kube.template("part-4g", GPU, selector=profile_is("4g.40gb"))
    kube.pod("part-a", "part-4g")
    kube.pod("part-b", "part-4g")
    seen = {}
    for name in ("part-a", "part-b"):
        claim = kube.claim_of(kube.wait_running(name))
        [result] = allocated(claim)
        units = unit_env(kube.env(name))
        assert len(units) == 1, f"{name}: expected one partition's env, got {sorted(units)}"
        [unit] = units.values()
        assert unit["NAME"] == result["device"]
        assert unit["CLAIM_UID"] == claim["metadata"]["uid"]
        assert unit["PARTITION_PROFILE"] == "4g.40gb"
        assert unit["CAPACITY_MEMORY"] == "40Gi"
        device = slice_device(kube.cp, kube.node.name, result["device"])
        assert device is not None, f"{result['device']} not in the node's slices"
        assert [c["counterSet"] for c in device["consumesCounters"]] == [COUNTERS]
        seen[name] = unit["NAME"]
    assert seen["part-a"] != seen["part-b"], f"both pods got {seen['part-a']}"

    kube.template("part-2g", GPU, selector=profile_is("2g.20gb"))
    kube.pod("part-c", "part-2g")
    kube.wait_unschedulable("part-c")
    # The counters were the only obstacle: freeing one partition lets it run.
    kube.delete_pod("part-a")
    [result] = allocated(kube.claim_of(kube.wait_running("part-c")))
    [unit] = unit_env(kube.env("part-c")).values()
    assert unit["NAME"] == result["device"]
    assert unit["PARTITION_PROFILE"] == "2g.20gb"
    assert unit["CAPACITY_MEMORY"] == "20Gi"


def test_node_match_attribute_across_requests(inventory: None, kube: Kube) -> None:
    """matchAttribute index over two requests: a 4g partition and "any GPU" (which
    alone would be gpu-0) come from the same physical GPU; the container sees both."""
    kube.claim_template(
        "same-gpu",
        [
            exact_request("part", GPU, profile_is("4g.40gb")),
            exact_request("any", GPU),
        ],
        constraints=[{"requests": ["part", "any"], "matchAttribute": "dra.example.com/index"}],
    )
    kube.pod("match-pod", "same-gpu")
    claim = kube.claim_of(kube.wait_running("match-pod"))
    results = {r["request"]: r["device"] for r in allocated(claim)}
    assert set(results) == {"part", "any"}, f"allocated: {results}"
    indexes = set()
    for name in results.values():
        device = slice_device(kube.cp, kube.node.name, name)
        assert device is not None, f"{name} not in the node's slices"
        indexes.add(device["attributes"]["index"]["int"])
    assert indexes == {4}, f"devices {results} have index {indexes}, not one shared value"
    units = unit_env(kube.env("match-pod"))
    assert {u["REQUEST"]: u["NAME"] for u in units.values()} == results
    assert all(u["CLAIM_UID"] == claim["metadata"]["uid"] for u in units.values())


def _consumption(kube: Kube, name: str) -> dict[str, Any]:
    device = slice_device(kube.cp, kube.node.name, name)
    assert device is not None, f"{name} not in the node's slices"
    [consumption] = device["consumesCounters"]
    return dict(consumption)


def test_node_compatibility_groups_keep_a_gpus_modes_apart(inventory: None, kube: Kube) -> None:
    """gpu-p0 is offered as "mig" partitions or "time-sliced" shares (compatibility
    groups, KEP-5963). With a 4g partition in use a share stays Pending although the
    counters have room for it (gpu-p0 is the only GPU it could come from); once the
    partition goes the share runs, and a second share joins it (same group)."""
    require_feature(kube.cp, "DRADeviceCompatibilityGroups")
    part, share = _consumption(kube, "gpu-p0-4g-0"), _consumption(kube, "gpu-p0-ts-0")
    assert part["compatibilityGroups"] == ["mig"]
    assert share["compatibilityGroups"] == ["time-sliced"]
    [counters] = [s["spec"]["sharedCounters"] for s in node_slices(kube.cp, kube.node.name)
                  if any(c["name"] == COUNTERS for c in s["spec"].get("sharedCounters") or [])]
    [total] = [c["counters"] for c in counters if c["name"] == COUNTERS]
    for counter in ("memory", "slices"):  # the counters alone would admit both
        used = sum(parse_quantity(d["counters"][counter]["value"]) for d in (part, share))
        assert used <= parse_quantity(total[counter]["value"]), counter

    kube.template("mode-mig", GPU, selector=profile_is("4g.40gb"))
    kube.template("mode-ts", GPU, selector=profile_is("ts.10gb"))
    kube.pod("mode-mig-a", "mode-mig")
    kube.wait_running("mode-mig-a")
    kube.pod("mode-ts-a", "mode-ts")
    kube.wait_unschedulable("mode-ts-a")
    assert kube.get_pod("mode-ts-a")["status"].get("phase") == "Pending"

    kube.delete_pod("mode-mig-a")
    [first] = allocated(kube.claim_of(kube.wait_running("mode-ts-a")))
    kube.pod("mode-ts-b", "mode-ts")
    [second] = allocated(kube.claim_of(kube.wait_running("mode-ts-b")))
    assert {first["device"], second["device"]} == {"gpu-p0-ts-0", "gpu-p0-ts-1"}


def test_node_partition_type_attribute_on_the_partitions_slice(inventory: None,
                                                              kube: Kube) -> None:
    """The pool's partition type attribute reaches the slice of gpu-p0's partitions
    (DRAPartitionableDevicesType), and only slices with counter consumers carry it."""
    require_feature(kube.cp, "DRAPartitionableDevicesType")
    for s in node_slices(kube.cp, kube.node.name):
        devices = s["spec"].get("devices") or []
        consumers = any(d.get("consumesCounters") for d in devices)
        expected = "dra.example.com/profile" if consumers else None
        assert s["spec"].get("partitionTypeAttribute") == expected, s["metadata"]["name"]
