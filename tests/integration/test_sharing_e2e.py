"""Sharing end to end: consumable capacity of shared GPUs and NICs, partitions of one
physical GPU, and admin access, through the allocator on the API stand-in, the plugin
process (its capacity ledger) and the kubelet emulator.

A forged allocation (written straight into the stand-in, as a buggy or stale scheduler
could) is how these tests reach the plugin's own checks: the allocator refuses the same
overbooking before the plugin would ever see it.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from simdra._driver.claims.plan.cdi import ENV_PREFIX, ID_LENGTH
from simdra._driver.claims.types import ClaimRef
from simdra._driver.core.quantity import parse_quantity, quantity_text
from simdra._driver.testing.allocation.builders import exactly, selector
from simdra._driver.testing.cluster import LocalCluster
from simdra._driver.testing.scheduler import AllocationError

GPU_CLASS = "gpu.dra.example.com"
NIC_CLASS = "nic.dra.example.com"
GIB = 2**30


@pytest.fixture(scope="module")
def shared_node() -> Iterator[LocalCluster]:
    """Three shared GPUs (80Gi memory, 100 compute each) and three 10G NICs; each test
    pins the devices it fills with a selector, so tests do not see each other's shares."""
    workdir = Path(tempfile.mkdtemp(dir="/tmp", prefix="sds-"))
    with LocalCluster(workdir) as local:
        local.start_plugin(profile="gpu-shared,nic", num_devices=3)
        yield local
    shutil.rmtree(workdir, ignore_errors=True)


def _on(attribute: str, value: Any) -> list[dict]:
    literal = json.dumps(value)
    return [selector(f'device.attributes["dra.example.com"].{attribute} == {literal}')]


def _results(claim: dict) -> list[dict]:
    return claim["status"]["allocation"]["devices"]["results"]


def _cdi_env(cluster: LocalCluster, uid: str) -> list[dict[str, str]]:
    """Per CDI device of the claim's spec file: env key (without the per-device prefix)
    -> value."""
    [spec_file] = cluster.cdi_root.glob(f"*_{uid}.json")
    devices = []
    for device in json.loads(spec_file.read_text())["devices"]:
        env = {}
        for entry in device["containerEdits"]["env"]:
            name, value = entry.split("=", 1)
            assert name.startswith(ENV_PREFIX)
            env[name[len(ENV_PREFIX) + ID_LENGTH + 1:]] = value
        devices.append(env)
    return devices


def _forge(cluster: LocalCluster, name: str, results: list[dict]) -> ClaimRef:
    """A claim whose status.allocation was written by hand, not by the allocator."""
    template = cluster.api.get_object("resourceclaims", "template-for-forgery", "default")
    if template is None:
        cluster.create_claim("template-for-forgery", exactly("gpu", GPU_CLASS))
        template = cluster.api.get_object("resourceclaims", "template-for-forgery", "default")
    assert template is not None
    forged = {
        "metadata": {"name": name, "namespace": "default"},
        "spec": copy.deepcopy(template["spec"]),
        "status": {"allocation": {"devices": {"results": results}}},
    }
    cluster.api.put_object("resourceclaims", forged)
    return cluster.claim_ref(name)


def _leaves_no_trace(cluster: LocalCluster, uid: str) -> bool:
    return (not list(cluster.cdi_root.glob(f"*{uid}*"))
            and not list(cluster.data_dir.rglob(f"*{uid}*")))


def _usage(cluster: LocalCluster) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "simdra", "usage", "--plugin-dir", str(cluster.data_dir),
         "-o", "json"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _device_usage(cluster: LocalCluster, device: str) -> dict:
    [found] = [d for d in _usage(cluster)["devices"] if d["device"] == device]
    return found


# --- shared GPU memory ----------------------------------------------------------------


def test_shares_fill_a_gpu_exactly_then_allocator_and_ledger_refuse_more(
        shared_node: LocalCluster) -> None:
    names = [f"mem-{i}" for i in range(4)]
    share_request = {"requests": {"memory": "20Gi", "compute": "20"}}
    for name in names:
        shared_node.create_claim(name, exactly("gpu", GPU_CLASS, selectors=_on("index", 0),
                                               capacity=share_request))
        shared_node.allocate(name)
    refs = [shared_node.claim_ref(n) for n in names]

    answer = shared_node.prepare(*names)

    assert all(answer[r.uid]["error"] == "" for r in refs)
    devices = [answer[r.uid]["devices"][0] for r in refs]
    assert {d["device_name"] for d in devices} == {"gpu-0"}  # 4 x 20Gi = the 80Gi of gpu-0
    assert len({d["share_id"] for d in devices}) == 4
    for ref, device in zip(refs, devices, strict=True):
        [env] = _cdi_env(shared_node, ref.uid)
        assert env["SHARE_ID"] == device["share_id"]
        assert env["CAPACITY_MEMORY"] == "20Gi"
        assert env["CAPACITY_MEMORY_VALUE"] == str(20 * GIB)
        assert env["CAPACITY_COMPUTE"] == "20"

    # The fifth share does not fit: the allocator says which device is full and why.
    shared_node.create_claim("mem-full", exactly("gpu", GPU_CLASS, selectors=_on("index", 0),
                                                 capacity={"requests": {"memory": "20Gi"}}))
    with pytest.raises(AllocationError) as refused:
        shared_node.allocate("mem-full")
    assert "20Gi of memory" in str(refused.value)
    assert "gpu-0: 80Gi of 80Gi used" in str(refused.value)

    # A scheduler that overbooks anyway is stopped by the plugin's ledger.
    overflow = {**_results(shared_node.api.get_object("resourceclaims", names[0], "default"))[0],
                "shareID": str(uuid.uuid4()),
                "consumedCapacity": {"memory": "1Gi", "compute": "0"}}
    forged = _forge(shared_node, "mem-forged", [overflow])

    error = shared_node.prepare("mem-forged")[forged.uid]["error"]

    assert "device node-1/gpu-0 capacity memory" in error
    assert "total 80Gi, used 80Gi by 4 other share(s), asked 1Gi" in error
    assert overflow["shareID"] in error and forged.uid in error
    assert _leaves_no_trace(shared_node, forged.uid)

    # Once a share is released, the same allocation fits.
    shared_node.unprepare(refs[0])
    retry = shared_node.prepare("mem-forged")[forged.uid]
    assert retry["error"] == ""
    assert retry["devices"][0]["share_id"] == overflow["shareID"]
    shared_node.unprepare(forged, *refs[1:])


def test_forged_negative_share_cannot_make_room_for_an_overbooking(
        shared_node: LocalCluster) -> None:
    full = {"requests": {"memory": "80Gi", "compute": "100"}}
    shared_node.create_claim("full-2", exactly("gpu", GPU_CLASS, selectors=_on("index", 2),
                                               capacity=full))
    [result] = _results(shared_node.allocate("full-2"))
    owner = shared_node.claim_ref("full-2")
    assert shared_node.prepare("full-2")[owner.uid]["error"] == ""
    negative = _forge(shared_node, "negative-2", [
        {**result, "shareID": str(uuid.uuid4()),
         "consumedCapacity": {"memory": "-80Gi", "compute": "0"}}])
    overbooking = _forge(shared_node, "overbooking-2", [
        {**result, "shareID": str(uuid.uuid4())}])

    answer = shared_node.prepare("negative-2", "overbooking-2")

    assert ("field status.allocation.devices.results[0].consumedCapacity[memory]: "
            "'-80Gi' is negative") in answer[negative.uid]["error"]
    assert "used 80Gi by 1 other share(s), asked 80Gi" in answer[overbooking.uid]["error"]
    assert _leaves_no_trace(shared_node, negative.uid)
    assert _leaves_no_trace(shared_node, overbooking.uid)
    shared_node.unprepare(owner)


# --- request policy rounding ----------------------------------------------------------


@pytest.mark.parametrize(
    ("asked", "granted", "granted_value"),
    [
        (None, "1M", "1000000"),  # no amount named: the policy default
        ("1k", "1M", "1000000"),  # below the minimum: raised to it
        ("1000001", "1000008", "1000008"),  # between steps: up to min + n * step
        ("1000000500m", "1000008", "1000008"),  # fractional: up as well
        ("2M", "2M", "2000000"),  # on a step: as asked
    ],
)
def test_nic_bandwidth_is_rounded_by_the_request_policy(
        shared_node: LocalCluster, asked: str | None, granted: str,
        granted_value: str) -> None:
    name = f"bw-{uuid.uuid4().hex[:8]}"
    capacity = {"capacity": {"requests": {"bandwidth": asked}}} if asked else {}
    shared_node.create_claim(name, exactly("net", NIC_CLASS, selectors=_on("interfaceName",
                                                                          "sim0"), **capacity))
    [result] = _results(shared_node.allocate(name))
    ref = shared_node.claim_ref(name)

    answer = shared_node.prepare(name)

    assert result["consumedCapacity"] == {"bandwidth": granted}
    assert answer[ref.uid]["error"] == ""
    [env] = _cdi_env(shared_node, ref.uid)
    # The plugin writes the amount in its own canonical form, whatever the string.
    assert (env["CAPACITY_BANDWIDTH"], env["CAPACITY_BANDWIDTH_VALUE"]) == (
        quantity_text(parse_quantity(granted)), granted_value)
    shared_node.unprepare(ref)


# --- admin access ---------------------------------------------------------------------


def test_admin_access_to_a_full_gpu_is_prepared_and_consumes_nothing(
        shared_node: LocalCluster) -> None:
    # All but the monitor's default 8Gi: admin access is held to remaining capacity,
    # as in the scheduler (allocator corpus: "admin: shared device capacity used up").
    whole = {"requests": {"memory": "72Gi", "compute": "90"}}
    shared_node.create_claim("owner", exactly("gpu", GPU_CLASS, selectors=_on("index", 1),
                                              capacity=whole))
    shared_node.allocate("owner")
    shared_node.create_claim("monitor", exactly("gpu", GPU_CLASS, selectors=_on("index", 1),
                                                adminAccess=True))
    [admin_result] = _results(shared_node.allocate("monitor"))
    owner, monitor = shared_node.claim_ref("owner"), shared_node.claim_ref("monitor")

    answer = shared_node.prepare("owner", "monitor")

    assert admin_result["adminAccess"] is True
    assert answer[owner.uid]["error"] == "" and answer[monitor.uid]["error"] == ""
    assert answer[monitor.uid]["devices"][0]["device_name"] == "gpu-1"
    [env] = _cdi_env(shared_node, monitor.uid)
    assert env["ADMIN_ACCESS"] == "true"
    usage = _device_usage(shared_node, "gpu-1")
    assert usage["used"] == {"compute": "90", "memory": "72Gi"}  # the owner's share only
    holders = {h["claim"]["name"]: h for h in usage["holders"]}
    assert holders["monitor"]["adminAccess"] is True
    assert holders["monitor"]["consumed"] == {}
    assert holders["owner"]["consumed"] == {"compute": "90", "memory": "72Gi"}
    shared_node.unprepare(owner, monitor)


# --- partitions -----------------------------------------------------------------------


def test_partition_in_use_blocks_the_whole_gpu_in_allocator_and_ledger(
        cluster: LocalCluster) -> None:
    node = cluster
    plugin = node.start_plugin(profile="gpu-partitioned", num_devices=1)
    whole_gpu = node.published_devices()["gpu-0"]
    node.create_claim("part", exactly("gpu", GPU_CLASS, selectors=_on("profile", "3g.40gb")))
    [part_result] = _results(node.allocate("part"))
    part = node.claim_ref("part")

    answer = node.prepare("part")

    assert answer[part.uid]["error"] == ""
    assert part_result["device"].startswith("gpu-0-3g-")
    [env] = _cdi_env(node, part.uid)
    assert env["PARTITION"] == "true"
    assert env["PARTITION_PROFILE"] == "3g.40gb"
    assert env["PARENT_UUID"] == whole_gpu["attributes"]["uuid"]["string"]
    assert env["CAPACITY_MEMORY"] == "40Gi"
    [counters] = _usage(node)["counterSets"]
    assert (counters["name"], counters["used"]) == ("gpu-0-counters",
                                                    {"memory": "40Gi", "slices": "3"})

    node.create_claim("whole", exactly("gpu", GPU_CLASS, selectors=_on("partition", False)))
    with pytest.raises(AllocationError) as refused:
        node.allocate("whole")
    assert "gpu-0-counters/slices: needs 7, 3 of 7 used" in str(refused.value)

    # The ledger of a restarted plugin is rebuilt from its checkpoint.
    plugin.stop()
    node.start_plugin(profile="gpu-partitioned", num_devices=1)
    forged = _forge(node, "whole-forged", [{**part_result, "device": "gpu-0"}])
    error = node.prepare("whole-forged")[forged.uid]["error"]

    assert "counter set gpu-0-counters counter slices: total 7, used 3" in error
    assert f"by device(s) {part_result['device']}, asked 7 by device(s) gpu-0" in error
    assert _leaves_no_trace(node, forged.uid)

    node.unprepare(part)
    assert node.prepare("whole-forged")[forged.uid]["error"] == ""
    node.unprepare(forged)
