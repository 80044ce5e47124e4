"""Shared devices end to end on one node: claims allocated by the allocator against the
built-in profiles, prepared over real directories, checked by the node's ledger."""

from __future__ import annotations

import copy
import json
import uuid

import pytest

from simdra._driver.claims.types import ClaimRef
from simdra._driver.testing.scheduler import AllocationError

from .builders import (
    ProfileCluster,
    assert_valid_cdi_spec,
    env_of,
    request,
    wants,
    with_profile,
)

GB = 10**9
GI = 2**30


def _ok(answers):
    assert all(not a.error for a in answers.values()), answers
    return answers


def _spec(tmp_path, ref):
    (path,) = (tmp_path / "cdi").glob(f"*_{ref.uid}.json")
    spec = json.loads(path.read_text())
    assert_valid_cdi_spec(spec)
    return spec


def _forge(cluster, like: ClaimRef, name: str, **changes) -> ClaimRef:
    """A claim whose allocation copies `like`'s first result with `changes` and a fresh
    UID and shareID: what a confused scheduler (or a stale cache) could hand us."""
    raw = copy.deepcopy(cluster.allocated[like.uid])
    raw["metadata"].update(name=name, uid=str(uuid.uuid4()))
    (first, *_) = raw["status"]["allocation"]["devices"]["results"]
    if "shareID" in first:
        first["shareID"] = str(uuid.uuid4())
    first.update(changes)
    raw["status"]["allocation"]["devices"]["results"] = [first]
    return cluster.put(raw)


def _files(tmp_path):
    return sorted(p.name for p in (tmp_path / "cdi").iterdir()), sorted(
        p.name for p in (tmp_path / "data" / "claims").iterdir()
    )


def test_many_claims_share_one_nic_up_to_exactly_its_capacity(tmp_path):
    cluster = ProfileCluster("nic")
    refs = [cluster.allocate(f"net-{i}", wants("net", "nic", bandwidth="1G")) for i in range(10)]
    with pytest.raises(AllocationError):  # the scheduler agrees the NIC is full
        cluster.allocate("one-more", wants("net", "nic", bandwidth="1M"))
    preparer = cluster.preparer(tmp_path)
    answers = _ok(preparer.prepare(refs))
    shares = {answers[r.uid].devices[0].share_id for r in refs}
    assert len(shares) == 10 and None not in shares
    assert preparer.ledger.used("node-a", "nic-0") == {"bandwidth": 10 * GB}
    for ref in refs:
        (device,) = _spec(tmp_path, ref)["devices"]
        env = env_of(_spec(tmp_path, ref), device["name"])
        assert (env["NAME"], env["CAPACITY_BANDWIDTH"]) == ("nic-0", "1G")
        assert env["CAPACITY_BANDWIDTH_VALUE"] == str(GB)
        assert env["SHARE_ID"] == answers[ref.uid].devices[0].share_id

    before = _files(tmp_path)
    forged = _forge(cluster, refs[0], "forged", consumedCapacity={"bandwidth": "8"})
    error = preparer.prepare([forged])[forged.uid].error
    assert (
        "device node-a/nic-0 capacity bandwidth: total 10G, used 10G by 10 other share(s), "
        "asked 8 (share "
    ) in error
    assert "8 over capacity" in error and "[step: check capacity]" in error
    assert _files(tmp_path) == before  # a refused prepare changes nothing
    assert preparer.ledger.used("node-a", "nic-0") == {"bandwidth": 10 * GB}


def test_one_nic_several_times_in_one_claim_and_in_other_claims(tmp_path):
    cluster = ProfileCluster("nic")
    double = cluster.allocate(
        "double", wants("a", "nic", bandwidth="3G"), wants("b", "nic", bandwidth="2G")
    )
    single = cluster.allocate("single", wants("c", "nic", bandwidth="5G"))
    preparer = cluster.preparer(tmp_path)
    answers = _ok(preparer.prepare([double, single]))
    devices = answers[double.uid].devices
    assert [(d.device_name, d.request_names) for d in devices] == [
        ("nic-0", ("a",)),
        ("nic-0", ("b",)),
    ]
    assert devices[0].share_id != devices[1].share_id
    assert devices[0].cdi_device_ids != devices[1].cdi_device_ids
    assert preparer.ledger.used("node-a", "nic-0") == {"bandwidth": 10 * GB}
    # Unpreparing one claim frees exactly its two shares.
    _ok(preparer.unprepare([double]))
    assert preparer.ledger.used("node-a", "nic-0") == {"bandwidth": 5 * GB}


def test_gpu_memory_and_compute_are_shared_by_policy(tmp_path):
    cluster = ProfileCluster("gpu-shared")
    big = cluster.allocate("big", wants("gpu", "gpu", memory="40Gi", compute="50"))
    odd = cluster.allocate("odd", wants("gpu", "gpu", memory="7.5Gi", compute="15"))
    default = cluster.allocate("default", request("gpu", "gpu"))
    preparer = cluster.preparer(tmp_path)
    answers = _ok(preparer.prepare([big, odd, default]))

    def env(ref):
        device = answers[ref.uid].devices[0]
        return env_of(_spec(tmp_path, ref), device.cdi_device_ids[0].split("=", 1)[1])

    # Requests are rounded up to the policy's grid; no request means the default.
    assert (env(odd)["CAPACITY_MEMORY"], env(odd)["CAPACITY_COMPUTE"]) == ("8Gi", "20")
    assert env(odd)["CAPACITY_MEMORY_VALUE"] == str(8 * GI)
    assert (env(default)["CAPACITY_MEMORY"], env(default)["CAPACITY_COMPUTE"]) == ("8Gi", "10")
    assert preparer.ledger.used("node-a", "gpu-0") == {"memory": 56 * GI, "compute": 80}
    with pytest.raises(AllocationError):
        cluster.allocate("too-big", wants("gpu", "gpu", memory="25Gi"))
    forged = _forge(cluster, big, "forged", consumedCapacity={"memory": "25Gi", "compute": "10"})
    error = preparer.prepare([forged])[forged.uid].error
    assert "device node-a/gpu-0 capacity memory: total 80Gi, used 56Gi by 3 other share(s)" in error
    assert "asked 25Gi" in error and "1Gi over capacity" in error
    assert "capacity compute" not in error  # 80 + 10 of 100 fits


def test_partitions_consume_counters_and_exhaust_the_gpu(tmp_path):
    cluster = ProfileCluster("gpu-partitioned")
    refs = [
        cluster.allocate("three", with_profile("gpu", "3g.40gb")),
        cluster.allocate("two-a", with_profile("gpu", "2g.20gb")),
        cluster.allocate("two-b", with_profile("gpu", "2g.20gb")),
    ]
    with pytest.raises(AllocationError):  # 3 + 2 + 2 of 7 slices are taken
        cluster.allocate("one", with_profile("gpu", "1g.10gb"))
    preparer = cluster.preparer(tmp_path)
    answers = _ok(preparer.prepare(refs))
    partition = answers[refs[0].uid].devices[0]
    assert partition.device_name == "gpu-0-3g-0" and partition.share_id is None
    env = env_of(_spec(tmp_path, refs[0]), partition.cdi_device_ids[0].split("=", 1)[1])
    parent = cluster.inventory.device("node-a", "gpu-0").attribute("uuid")
    assert (env["PARTITION"], env["PARTITION_PROFILE"], env["PARENT_UUID"]) == (
        "true",
        "3g.40gb",
        parent,
    )
    assert env["UUID"].startswith("MIG-") and env["CAPACITY_MEMORY"] == "40Gi"

    whole = _forge(cluster, refs[0], "whole", device="gpu-0")
    error = preparer.prepare([whole])[whole.uid].error
    assert (
        "pool node-a counter set gpu-0-counters counter slices: total 7, used 7 by device(s) "
        "gpu-0-2g-0, gpu-0-2g-1, gpu-0-3g-0, asked 7 by device(s) gpu-0: 7 over"
    ) in error
    assert "counter memory: total 80Gi, used 80Gi" in error
    one = _forge(cluster, refs[0], "one", device="gpu-0-1g-0")
    assert "counter slices: total 7, used 7" in preparer.prepare([one])[one.uid].error

    # Once the partitions are gone, the whole GPU fits again.
    _ok(preparer.unprepare(refs))
    assert preparer.ledger.counters_used("node-a").amounts == {}
    assert _ok(preparer.prepare([whole]))[whole.uid].devices[0].device_name == "gpu-0"


def test_admin_access_is_marked_and_consumes_nothing(tmp_path):
    cluster = ProfileCluster("gpu,nic")
    # Room for the watcher's default 1M: admin access is held to remaining capacity.
    holder = cluster.allocate("holder", request("gpu", "gpu"), wants("net", "nic", bandwidth="9G"))
    watcher = cluster.allocate(
        "watcher",
        request("gpu", "gpu", adminAccess=True),
        request("net", "nic", adminAccess=True),
        namespace="monitoring",
    )
    # The allocator gave the watcher the very devices the holder has.
    assert {r["device"] for r in cluster.results(watcher)} == {"gpu-0", "nic-0"}
    preparer = cluster.preparer(tmp_path)
    answers = _ok(preparer.prepare([holder, watcher]))
    spec = _spec(tmp_path, watcher)
    for device in answers[watcher.uid].devices:
        env = env_of(spec, device.cdi_device_ids[0].split("=", 1)[1])
        assert env["ADMIN_ACCESS"] == "true"
    assert preparer.ledger.used("node-a", "nic-0") == {"bandwidth": 9 * GB}
    # The exclusive GPU is still the holder's alone: another holder is refused.
    other = _forge(cluster, holder, "other")
    assert "is exclusive and already prepared" in preparer.prepare([other])[other.uid].error


def test_restart_with_fifty_shares_keeps_the_ledger_exact(tmp_path):
    cluster = ProfileCluster("nic")
    refs = [cluster.allocate(f"s-{i}", wants("net", "nic", bandwidth="200M")) for i in range(50)]
    _ok(cluster.preparer(tmp_path).prepare(refs))

    restarted = cluster.preparer(tmp_path)
    assert restarted.ledger.used("node-a", "nic-0") == {"bandwidth": 10 * GB}
    assert len(restarted.ledger.entries("node-a", "nic-0")) == 50
    forged = _forge(cluster, refs[0], "forged", consumedCapacity={"bandwidth": "8"})
    assert "used 10G by 50 other share(s)" in restarted.prepare([forged])[forged.uid].error
    cluster.forget(forged)

    _ok(restarted.unprepare(refs[:5]))
    again = cluster.preparer(tmp_path)
    assert again.ledger.used("node-a", "nic-0") == {"bandwidth": 9 * GB}
    for ref in refs[:5]:
        cluster.forget(ref)
    newcomer = cluster.allocate("newcomer", wants("net", "nic", bandwidth="1G"))
    _ok(again.prepare([newcomer]))
    assert again.ledger.used("node-a", "nic-0") == {"bandwidth": 10 * GB}
