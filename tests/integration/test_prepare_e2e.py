"""NodePrepare/NodeUnprepare end to end: claims allocated by the allocator on the API
stand-in, prepared by the plugin process through the kubelet emulator (v1 and v1beta1)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from simdra._driver.claims.types import ClaimRef
from simdra._driver.testing.allocation.builders import exactly
from simdra._driver.testing.cluster import LocalCluster
from tests.claims.builders import assert_valid_cdi_spec


def _gpu(count: int = 1) -> dict:
    return exactly("gpu", "gpu.dra.example.com", count=count)


def _nic(bandwidth: str) -> dict:
    return exactly("net", "nic.dra.example.com", capacity={"requests": {"bandwidth": bandwidth}})


def _spec_files(cluster: LocalCluster, uid: str) -> list[Path]:
    return sorted(cluster.cdi_root.glob(f"*_{uid}.json"))


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_exclusive_two_gpu_claim(shared_cluster: LocalCluster, version: str) -> None:
    name = f"two-gpus-{version}"
    shared_cluster.create_claim(name, _gpu(count=2))
    results = shared_cluster.allocate(name)["status"]["allocation"]["devices"]["results"]
    ref = shared_cluster.claim_ref(name)

    answer = shared_cluster.prepare(name, version=version)

    assert list(answer) == [ref.uid]
    entry = answer[ref.uid]
    assert entry["error"] == ""
    assert sorted(d["device_name"] for d in entry["devices"]) == sorted(
        r["device"] for r in results)
    for device in entry["devices"]:
        assert device["request_names"] == ["gpu"]
        assert device["pool_name"] == shared_cluster.node_name
        assert device["share_id"] is None
        [cdi_id] = device["cdi_device_ids"]
        assert cdi_id.startswith("k8s.dra.example.com/device=") and ref.uid in cdi_id
    assert len(_spec_files(shared_cluster, ref.uid)) == 1

    shared_cluster.unprepare(ref, version=version)
    assert _spec_files(shared_cluster, ref.uid) == []


def test_two_claims_share_one_nic(shared_cluster: LocalCluster) -> None:
    names = ["share-a", "share-b"]
    for name in names:
        shared_cluster.create_claim(name, _nic("1G"))
        shared_cluster.allocate(name)
    refs = [shared_cluster.claim_ref(n) for n in names]

    answer = shared_cluster.prepare(*names, version="v1")

    devices = [answer[r.uid]["devices"][0] for r in refs]
    assert all(answer[r.uid]["error"] == "" for r in refs)
    assert devices[0]["device_name"] == devices[1]["device_name"]  # one NIC, two shares
    share_ids = [d["share_id"] for d in devices]
    assert all(share_ids) and share_ids[0] != share_ids[1]
    assert devices[0]["cdi_device_ids"] != devices[1]["cdi_device_ids"]
    for ref, share_id in zip(refs, share_ids, strict=True):
        [spec_file] = _spec_files(shared_cluster, ref.uid)
        spec = json.loads(spec_file.read_text())
        assert_valid_cdi_spec(spec)
        env = spec["devices"][0]["containerEdits"]["env"]
        assert any(e.endswith(f"SHARE_ID={share_id}") for e in env)
        assert any(e.endswith("BANDWIDTH=1G") for e in env)
    shared_cluster.unprepare(*refs)


def test_v1beta1_answer_has_no_share_id(shared_cluster: LocalCluster) -> None:
    shared_cluster.create_claim("beta-share", _nic("2G"))
    shared_cluster.allocate("beta-share")
    ref = shared_cluster.claim_ref("beta-share")

    answer = shared_cluster.prepare("beta-share", version="v1beta1")

    [device] = answer[ref.uid]["devices"]
    assert device["device_name"].startswith("nic-")
    assert device["share_id"] is None  # the field does not exist in v1beta1
    shared_cluster.unprepare(ref)


def test_prepare_twice_returns_same_answer_without_rewriting(
        shared_cluster: LocalCluster) -> None:
    shared_cluster.create_claim("again", _gpu(), _nic("1G") | {"name": "net"})
    shared_cluster.allocate("again")
    ref = shared_cluster.claim_ref("again")
    first = shared_cluster.prepare("again")
    [spec_file] = _spec_files(shared_cluster, ref.uid)
    before = spec_file.stat()

    second = shared_cluster.prepare("again")

    assert second == first
    after = spec_file.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    shared_cluster.unprepare(ref)


def test_unprepare_of_unknown_uid_succeeds(shared_cluster: LocalCluster) -> None:
    ref = ClaimRef("default", "never-seen", str(uuid.uuid4()))

    answer = shared_cluster.unprepare(ref)

    assert answer == {ref.uid: {"error": ""}}


def test_bad_claims_get_per_claim_errors_and_good_ones_still_prepare(
        shared_cluster: LocalCluster) -> None:
    shared_cluster.create_claim("good", _gpu())
    shared_cluster.allocate("good")
    shared_cluster.create_claim("unallocated", _gpu())
    good = shared_cluster.claim_ref("good")
    missing = ClaimRef("default", "no-such-claim", str(uuid.uuid4()))
    unallocated = shared_cluster.claim_ref("unallocated")
    replaced = ClaimRef("default", "good", str(uuid.uuid4()))  # same name, other UID
    assert shared_cluster.kubelet is not None

    answer = shared_cluster.kubelet.prepare([good, missing, unallocated, replaced],
                                            driver_name=shared_cluster.driver_name)

    assert answer[good.uid]["error"] == ""
    assert answer[good.uid]["devices"]
    assert "not found" in answer[missing.uid]["error"]
    assert "not allocated" in answer[unallocated.uid]["error"]
    assert replaced.uid in answer[replaced.uid]["error"]
    for uid in (missing.uid, unallocated.uid, replaced.uid):
        assert answer[uid]["devices"] == []
        assert _spec_files(shared_cluster, uid) == []
    shared_cluster.unprepare(good)
