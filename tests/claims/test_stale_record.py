"""A record answers a prepare only for the allocation it was made for: the same claim
allocated other devices is prepared again for them, over real directories."""

from __future__ import annotations

import json
import logging
import os

import pytest

from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.checkpoint import Checkpoint
from simdra._driver.claims.types import ClaimRef

from .builders import DRIVER, GPU_POOL, NIC_POOL, SHARE_1, SHARE_2, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
OTHER_UID = "dddddddd-0000-4000-8000-000000000004"


class Crash(BaseException):
    """A simulated process death: no except-Exception handler catches it."""


class CountingSource(StaticClaimSource):
    """The API's claims; counts the reads, and fails them while `down` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0
        self.down = False

    def get(self, namespace, name):
        self.reads += 1
        if self.down:
            raise ConnectionError("api server unreachable")
        return super().get(namespace, name)


class Node:
    """A node's directories plus the API's claims; `preparer()` is a (re)started driver."""

    def __init__(self, tmp_path):
        self.cdi = tmp_path / "cdi"
        self.data = tmp_path / "data"
        self.source = CountingSource()
        self.inventory = inventory(gpus=3, nics=1)

    def allocate(self, uid, *results):
        """Store the claim `uid` (always under the same name) with these results."""
        raw = claim(uid, list(results), name=f"claim-{uid[:8]}")
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def preparer(self, **kwargs):
        return Preparer(DRIVER, self.source, lambda: self.inventory, self.cdi, self.data, **kwargs)

    def spec(self, uid):
        return json.loads((self.cdi / f"k8s.{DRIVER}-device_{uid}.json").read_text())

    def recorded_devices(self, uid):
        """The (pool, device, shareID)s of the claim's record on disk."""
        records, problems = Checkpoint(self.data).load_all()
        assert problems == []
        return sorted(unit.key for unit in records[uid].units)

    def file_states(self, uid):
        paths = (self.cdi / f"k8s.{DRIVER}-device_{uid}.json", self.data / "claims" / f"{uid}.json")
        return [(p.stat().st_ino, p.stat().st_mtime_ns) for p in paths]


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def _ok(answers):
    assert all(not a.error for a in answers.values()), answers
    return answers


def _device_nodes(spec):
    return sorted(n["path"] for d in spec["devices"] for n in d["containerEdits"]["deviceNodes"])


def test_a_claim_allocated_another_device_is_prepared_for_it(node, caplog):
    ref = node.allocate(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    node.allocate(A, result("gpus", "gpu-1"))  # deallocated, then allocated anew

    with caplog.at_level(logging.INFO, logger="simdra._driver.claims.prepare"):
        (device,) = _ok(preparer.prepare([ref]))[A].devices

    assert (device.pool_name, device.device_name) == (GPU_POOL, "gpu-1")
    assert node.recorded_devices(A) == [(GPU_POOL, "gpu-1", None)]
    assert _device_nodes(node.spec(A)) == ["/dev/simdra/gpu1"]
    assert device.cdi_device_ids == (f"k8s.{DRIVER}/device={A}-gpu-1",)
    assert preparer.ledger.entries(GPU_POOL, "gpu-0") == ()
    assert [e.claim_uid for e in preparer.ledger.entries(GPU_POOL, "gpu-1")] == [A]
    (line,) = [r.getMessage() for r in caplog.records if "other devices" in r.getMessage()]
    assert A in line and f"[{GPU_POOL}/gpu-0]" in line and f"[{GPU_POOL}/gpu-1]" in line
    # The old device is free for another claim; a restart finds what was answered.
    _ok(preparer.prepare([node.allocate(B, result("gpus", "gpu-0"))]))
    assert node.preparer().prepared()[A].result.devices == (device,)


def test_a_claim_given_another_share_moves_its_share_in_the_ledger(node):
    ref = node.allocate(A, result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "6G"}))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    node.allocate(A, result("net", "nic-0", share=SHARE_2, consumed={"bandwidth": "6G"}))

    (device,) = _ok(preparer.prepare([ref]))[A].devices

    assert device.share_id == SHARE_2
    assert [e.share_id for e in preparer.ledger.entries(NIC_POOL, "nic-0")] == [SHARE_2]
    assert node.recorded_devices(A) == [(NIC_POOL, "nic-0", SHARE_2)]


def test_the_old_devices_are_held_until_the_batch_is_written(node):
    # Should A's record write fail, its old record still names gpu-0: no claim of the
    # same batch may take gpu-0. The next call finds it free.
    ref = node.allocate(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    node.allocate(A, result("gpus", "gpu-1"))
    other = node.allocate(B, result("gpus", "gpu-0"))

    answers = preparer.prepare([ref, other])

    assert [d.device_name for d in answers[A].devices] == ["gpu-1"]
    assert "exclusive and already prepared" in answers[B].error
    assert node.recorded_devices(A) == [(GPU_POOL, "gpu-1", None)]
    assert [d.device_name for d in _ok(preparer.prepare([other]))[B].devices] == ["gpu-0"]
    assert [e.claim_uid for e in preparer.ledger.entries(GPU_POOL, "gpu-0")] == [B]


def test_a_failed_read_is_answered_from_the_record(node):
    ref = node.allocate(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    first = _ok(preparer.prepare([ref]))[A]
    before = node.file_states(A)
    node.allocate(A, result("gpus", "gpu-1"))  # what the API holds, unseen while it is down
    node.source.down = True
    node.source.reads = 0

    assert _ok(preparer.prepare([ref]))[A] == first

    assert node.source.reads == 1  # it was asked, and said nothing about the allocation
    assert node.file_states(A) == before
    assert [e.claim_uid for e in preparer.ledger.entries(GPU_POOL, "gpu-0")] == [A]


def test_an_unchanged_allocation_is_answered_from_the_record_without_a_rewrite(node, caplog):
    ref = node.allocate(A, result("gpus", "gpu-0"), result("net", "nic-0", share=SHARE_1))
    preparer = node.preparer()
    first = _ok(preparer.prepare([ref]))[A]
    before = node.file_states(A)
    node.source.reads = 0

    with caplog.at_level(logging.INFO, logger="simdra._driver.claims.prepare"):
        for again in (preparer, node.preparer()):  # also after a restart
            assert _ok(again.prepare([ref]))[A] == first

    assert node.source.reads == 2  # the claim was read, and found as recorded
    assert node.file_states(A) == before
    assert not [r for r in caplog.records if "other devices" in r.getMessage()]


def test_a_new_allocation_that_does_not_fit_keeps_the_record_and_its_devices(node):
    ref = node.allocate(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    _ok(preparer.prepare([node.allocate(B, result("gpus", "gpu-1"))]))
    before = node.file_states(A)
    node.allocate(A, result("gpus", "gpu-1"))  # the node still holds gpu-1 for B

    error = preparer.prepare([ref])[A].error

    assert f"device {GPU_POOL}/gpu-1 is exclusive and already prepared for claim {B}" in error
    assert "[step: check capacity]" in error
    assert node.file_states(A) == before and node.recorded_devices(A) == [(GPU_POOL, "gpu-0", None)]
    assert [e.claim_uid for e in preparer.ledger.entries(GPU_POOL, "gpu-0")] == [A]
    assert [e.claim_uid for e in preparer.ledger.entries(GPU_POOL, "gpu-1")] == [B]


def test_another_claim_under_the_name_is_an_error_and_the_record_stays(node):
    ref = node.allocate(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    before = node.file_states(A)
    raw = claim(OTHER_UID, [result("gpus", "gpu-0")], name=ref.name)  # deleted, re-created
    node.source.put(raw)

    error = preparer.prepare([ref])[A].error

    assert f"the API server has uid {OTHER_UID}, so the claim got replaced" in error
    assert node.file_states(A) == before and A in preparer.ledger


def test_a_deallocated_claim_is_not_answered_from_its_record(node):
    ref = node.allocate(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    before = node.file_states(A)
    del node.source.claims[("default", ref.name)]["status"]

    error = preparer.prepare([ref])[A].error

    assert "not allocated" in error and "[step: read allocation]" in error
    # Nothing is undone by a prepare: the kubelet's unprepare (or reconciliation) is.
    assert node.file_states(A) == before and A in preparer.ledger


@pytest.mark.parametrize("step", ["write checkpoint", "write CDI spec", "answer"])
def test_a_crash_while_preparing_a_new_allocation_converges_after_restart(node, step):
    ref = node.allocate(A, result("gpus", "gpu-0"))
    _ok(node.preparer().prepare([ref]))
    node.allocate(A, result("gpus", "gpu-1"))

    def crash(at):
        if at == step:
            raise Crash(at)

    with pytest.raises(Crash):
        node.preparer(fault=crash).prepare([ref])

    restarted = node.preparer()
    # The record is the old one or the new one, and the CDI spec always follows it.
    (device,) = [key[1] for key in node.recorded_devices(A)]
    assert device == ("gpu-0" if step == "write checkpoint" else "gpu-1")
    assert _device_nodes(node.spec(A)) == [f"/dev/simdra/gpu{device[-1]}"]
    assert sorted(os.listdir(node.cdi)) == [f"k8s.{DRIVER}-device_{A}.json"]
    (answer,) = _ok(restarted.prepare([ref]))[A].devices
    assert answer.device_name == "gpu-1" and node.recorded_devices(A) == [(GPU_POOL, "gpu-1", None)]
    assert _device_nodes(node.spec(A)) == ["/dev/simdra/gpu1"]
