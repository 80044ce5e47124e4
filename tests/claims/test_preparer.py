"""Prepare/unprepare over real directories: answers, files, restarts, crashes."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import threading

import pytest

from simdra._driver import atomicfile
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.checkpoint import Checkpoint
from simdra._driver.claims.types import ClaimRef
from tests.claims.builders import RULES

from .builders import (
    DRIVER,
    NIC_POOL,
    SHARE_1,
    SHARE_2,
    assert_valid_cdi_spec,
    claim,
    inventory,
    result,
)

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
C = "cccccccc-0000-4000-8000-000000000003"


class Crash(BaseException):
    """A simulated process death: no except-Exception handler catches it."""


class Node:
    """A node's directories plus the API's claims; `preparer()` is a (re)started driver."""

    def __init__(self, tmp_path):
        self.cdi = tmp_path / "cdi"
        self.data = tmp_path / "data"
        self.source = StaticClaimSource()
        self.inventory = inventory(gpus=2, nics=1)

    def add(self, uid, *results):
        raw = claim(uid, list(results))
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def preparer(self, **kwargs):
        return Preparer(DRIVER, self.source, lambda: self.inventory, self.cdi, self.data, **kwargs)

    def spec_path(self, uid):
        return self.cdi / f"k8s.{DRIVER}-device_{uid}.json"

    def record_path(self, uid):
        return self.data / "claims" / f"{uid}.json"

    def files(self):
        return sorted(os.listdir(self.cdi)), sorted(os.listdir(self.data / "claims"))


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def _ok(answers):
    assert all(not a.error for a in answers.values()), answers
    return answers


def test_exclusive_two_gpu_claim(node):
    ref = node.add(A, result("gpus", "gpu-0"), result("gpus", "gpu-1"))
    answer = _ok(node.preparer().prepare([ref]))[A]
    assert [(d.device_name, d.request_names) for d in answer.devices] == [
        ("gpu-0", ("gpus",)),
        ("gpu-1", ("gpus",)),
    ]
    spec = json.loads(node.spec_path(A).read_text())
    assert_valid_cdi_spec(spec)
    ids = {f"{spec['kind']}={d['name']}" for d in spec["devices"]}
    assert ids == {i for d in answer.devices for i in d.cdi_device_ids}
    assert node.record_path(A).exists()


def test_two_claims_share_one_nic_with_distinct_shares_and_cdi_devices(node):
    first = node.add(A, result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "4G"}))
    second = node.add(B, result("net", "nic-0", share=SHARE_2, consumed={"bandwidth": "6G"}))
    preparer = node.preparer()
    answers = _ok(preparer.prepare([first, second]))
    (dev_a,), (dev_b,) = answers[A].devices, answers[B].devices
    assert (dev_a.device_name, dev_b.device_name) == ("nic-0", "nic-0")
    assert (dev_a.share_id, dev_b.share_id) == (SHARE_1, SHARE_2)
    assert dev_a.cdi_device_ids != dev_b.cdi_device_ids
    for uid in (A, B):
        assert_valid_cdi_spec(json.loads(node.spec_path(uid).read_text()))
    assert preparer.ledger.used(NIC_POOL, "nic-0") == {"bandwidth": 10_000_000_000}
    third = node.add(
        C, result("net", "nic-0", share=SHARE_1.replace("1", "3"), consumed={"bandwidth": "1M"})
    )
    error = preparer.prepare([third])[C].error
    assert "capacity bandwidth: total 10G, used 10G by 2 other share(s), asked 1M" in error
    assert not node.spec_path(C).exists() and not node.record_path(C).exists()


def test_prepare_again_returns_the_same_answer_without_touching_files(node):
    ref = node.add(A, result("gpus", "gpu-0"), result("net", "nic-0", share=SHARE_1, consumed={}))
    first = _ok(node.preparer().prepare([ref]))[A]
    before = [
        (p.stat().st_ino, p.stat().st_mtime_ns) for p in (node.spec_path(A), node.record_path(A))
    ]
    node.source.claims.clear()  # a failed read says nothing: the record answers
    for preparer in (node.preparer(), node.preparer()):  # also across restarts
        again = _ok(preparer.prepare([ref, ref]))[A]
        assert again == first
    after = [
        (p.stat().st_ino, p.stat().st_mtime_ns) for p in (node.spec_path(A), node.record_path(A))
    ]
    assert after == before


def test_a_prepared_claim_whose_device_went_away_is_not_answered_ready(node):
    # After a reboot the kubelet prepares again before it restarts the pod (helper v0.38's
    # contract): a device gone meanwhile is an error naming it, never a CDI device of
    # nothing, and the record stays, so the claim is ready again when the device is back.
    ref = node.add(A, result("gpus", "gpu-1"), result("net", "nic-0", share=SHARE_1, consumed={}))
    first = _ok(node.preparer().prepare([ref]))[A]
    node.inventory = inventory(gpus=1, nics=1)  # gpu-1 fell off the bus
    (answer,) = node.preparer().prepare([ref]).values()
    assert "node-a/gpu-1 is no longer on this node; not ready" in answer.error
    assert "[step: check devices ready]" in answer.error and "nic-0" not in answer.error
    assert node.record_path(A).exists() and node.spec_path(A).exists()
    node.inventory = inventory(gpus=2, nics=1)
    assert _ok(node.preparer().prepare([ref]))[A] == first


def test_prepare_restores_a_lost_cdi_file_of_a_prepared_claim(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    content = node.spec_path(A).read_bytes()
    node.spec_path(A).unlink()
    _ok(preparer.prepare([ref]))
    assert node.spec_path(A).read_bytes() == content


def test_unprepare_of_unknown_claim_succeeds(node):
    answers = node.preparer().unprepare([ClaimRef("default", "gone", A)])
    assert answers == {A: answers[A]} and answers[A].error == ""


def test_unprepare_after_restart_uses_persisted_state_and_frees_the_device(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    _ok(node.preparer().prepare([ref]))
    node.source.claims.clear()  # the claim object is gone from the API
    restarted = node.preparer()
    assert A in restarted.ledger
    assert _ok(restarted.unprepare([ref]))[A].error == ""
    assert node.files() == ([], [])
    assert A not in restarted.ledger
    other = node.add(B, result("gpus", "gpu-0"))
    _ok(restarted.prepare([other]))


def test_one_bad_claim_never_affects_the_others(node):
    good = node.add(A, result("gpus", "gpu-0"))
    conflicting = node.add(B, result("gpus", "gpu-0"))
    missing = ClaimRef("default", "missing", C)
    replaced = ClaimRef(good.namespace, good.name, "dddddddd-0000-4000-8000-000000000004")
    unallocated = node.add("eeeeeeee-0000-4000-8000-000000000005")
    del node.source.claims[("default", unallocated.name)]["status"]
    answers = node.preparer().prepare([good, conflicting, missing, replaced, unallocated])
    assert list(answers) == [A, B, C, replaced.uid, unallocated.uid]
    assert answers[A].error == "" and len(answers[A].devices) == 1
    assert (
        f"device node-a/gpu-0 is exclusive and already prepared for claim {A}" in answers[B].error
    )
    assert "default/missing: not found" in answers[C].error and "fetch claim" in answers[C].error
    assert "got replaced" in answers[replaced.uid].error
    assert "not allocated" in answers[unallocated.uid].error
    assert node.files() == ([node.spec_path(A).name], [f"{A}.json"])


def test_api_errors_become_per_claim_errors_naming_the_step(node):
    class Down:
        def get(self, namespace, name):
            raise ConnectionError("api server unreachable")

    preparer = Preparer(DRIVER, Down(), lambda: node.inventory, node.cdi, node.data, rules=RULES)
    error = preparer.prepare([ClaimRef("ns", "c", A)])[A].error
    assert (
        error == f"claim ns/c (uid {A}): step fetch claim: ConnectionError: api server unreachable"
    )


@pytest.mark.parametrize("uid", ["../../etc", "../x", "a/b", "..", ""])
def test_hostile_claim_uids_never_become_paths(node, tmp_path, uid):
    preparer = node.preparer()
    hostile = ClaimRef("default", "evil", uid)
    node.source.put(claim(uid, [result("gpus", "gpu-0")], name="evil"))
    error = preparer.prepare([hostile])[uid].error
    assert "claim uid is not usable in file names" in error and "unsafe file name" in error
    assert preparer.unprepare([hostile])[uid].error == ""  # nothing to undo
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cdi", "data"]
    assert node.files() == ([], [])


def test_claims_are_read_outside_the_lock_and_written_inside(node):
    # As the Go helper: a slow API server must not hold the lock other calls wait for.
    inside = []
    steps = []

    @contextlib.contextmanager
    def serialize():
        inside.append(True)
        yield
        inside.pop()

    class CheckingSource(StaticClaimSource):
        def get(self, namespace, name):
            assert not inside, "claim read while holding the serialization lock"
            return super().get(namespace, name)

    node.source = CheckingSource()
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer(serialize=serialize,
                             fault=lambda step: steps.append((step, bool(inside))))
    _ok(preparer.prepare([ref]))
    _ok(preparer.unprepare([ref]))
    assert inside == []
    assert steps and all(held for _, held in steps), steps


def test_a_failed_read_is_that_claims_error_only(node):
    good = node.add(A, result("gpus", "gpu-0"))
    missing = ClaimRef("default", "gone", B)

    results = node.preparer().prepare([good, missing])

    assert results[A].error == ""
    assert "gone" in results[B].error and "fetch claim" in results[B].error


def test_corrupt_record_blocks_prepare_and_unprepare_cleans_up_keeping_it_aside(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    _ok(node.preparer().prepare([ref]))
    node.record_path(A).write_text('{"truncated')
    preparer = node.preparer()
    (problem,) = preparer.corrupt_records()
    assert problem.uid == A and "not valid JSON" in problem.reason
    assert node.spec_path(A).exists()  # not an orphan: its claim is known, if unreadable
    error = preparer.prepare([ref])[A].error
    assert str(node.record_path(A)) in error and "not valid JSON" in error
    assert _ok(preparer.unprepare([ref]))[A].error == ""
    assert node.files() == ([], [f"{A}.json.corrupt"])
    assert (node.data / "claims" / f"{A}.json.corrupt").read_text() == '{"truncated'
    assert preparer.corrupt_records() == []
    _ok(preparer.prepare([ref]))


def test_start_removes_orphans_and_temp_files_but_nothing_else(node):
    node.cdi.mkdir(parents=True)
    (node.data / "claims").mkdir(parents=True)
    foreign = [
        "k8s.other.example.com-device_" + A + ".json",
        "vendor.json",
        f"k8s.{DRIVER}-device_{A}.yaml",
    ]
    for name in foreign:
        (node.cdi / name).write_text("{}")
    node.spec_path(B).write_text("{}")  # ours, but no record: a crash leftover
    (node.cdi / f".{node.spec_path(C).name}.abc123.tmp").write_text("{")
    (node.data / "claims" / f".{A}.json.xyz.tmp").write_text("{")
    node.preparer()
    assert node.files() == (sorted(foreign), [])


PREPARE_STEPS = ["write checkpoint", "write CDI spec", "answer"]
UNPREPARE_STEPS = ["remove CDI spec", "remove checkpoint"]


def _crash_at(target):
    def fault(step):
        if step == target:
            raise Crash(step)

    return fault


def _assert_converged(node, expected_uids):
    """Every CDI file of ours has a valid record and the other way round."""
    cdi_files, records = node.files()
    assert cdi_files == sorted(node.spec_path(u).name for u in expected_uids)
    assert records == sorted(f"{u}.json" for u in expected_uids)
    records, problems = Checkpoint(node.data).load_all()
    assert problems == [] and sorted(records) == sorted(expected_uids)


@pytest.mark.parametrize("step", PREPARE_STEPS)
def test_crash_during_prepare_converges_after_restart(node, step):
    ref = node.add(A, result("gpus", "gpu-0"), result("net", "nic-0", share=SHARE_1, consumed={}))
    with pytest.raises(Crash):
        node.preparer(fault=_crash_at(step)).prepare([ref])
    restarted = node.preparer()
    _assert_converged(node, [A] if step != "write checkpoint" else [])
    answer = _ok(restarted.prepare([ref]))[A]
    assert len(answer.devices) == 2
    _assert_converged(node, [A])
    assert json.loads(node.spec_path(A).read_text())["devices"]
    _ok(restarted.unprepare([ref]))
    _assert_converged(node, [])


@pytest.mark.parametrize("step", UNPREPARE_STEPS)
def test_crash_during_unprepare_converges_after_restart(node, step):
    ref = node.add(A, result("gpus", "gpu-0"))
    keep = node.add(B, result("gpus", "gpu-1"))
    _ok(node.preparer().prepare([ref, keep]))
    with pytest.raises(Crash):
        node.preparer(fault=_crash_at(step)).unprepare([ref])
    restarted = node.preparer()
    _assert_converged(node, [A, B])  # the record is still there, so is its CDI file
    _ok(restarted.unprepare([ref]))
    _assert_converged(node, [B])
    # The freed GPU can be prepared for someone else; the kept claim is intact.
    _ok(restarted.prepare([node.add(C, result("gpus", "gpu-0"))]))
    assert _ok(restarted.prepare([keep]))[B].devices[0].device_name == "gpu-1"


def test_failed_cdi_write_is_reported_and_repaired_by_the_next_prepare(node):
    ref = node.add(A, result("gpus", "gpu-0"))
    calls = []

    def fail_once(step):
        if step == "write CDI spec" and not calls:
            calls.append(step)
            raise OSError(28, "No space left on device")

    preparer = node.preparer(fault=fail_once)
    error = preparer.prepare([ref])[A].error
    assert f"uid {A}): step write CDI spec: OSError" in error
    # Recorded, so the device stays booked for this claim while the kubelet retries.
    assert preparer.prepare([node.add(B, result("gpus", "gpu-0"))])[B].error
    answer = _ok(preparer.prepare([ref]))[A]
    assert node.spec_path(A).exists() and answer.devices[0].device_name == "gpu-0"


def _fail_next_file_fsync_in(monkeypatch, directory):
    """The next fsync of a file's content in `directory` fails (a failing disk)."""
    real = os.fsync
    failed = []

    def fsync(fd):
        if not failed and os.path.dirname(os.readlink(f"/proc/self/fd/{fd}")) == str(directory):
            failed.append(fd)
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(atomicfile.os, "fsync", fsync)
    return failed


def test_a_cdi_spec_whose_content_did_not_sync_is_never_put_in_place(node, monkeypatch):
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    failed = _fail_next_file_fsync_in(monkeypatch, node.cdi)
    error = preparer.prepare([ref])[A].error
    assert failed and f"uid {A}): step write CDI spec: OSError" in error
    # The record is durable and books the device; no spec, and no temp file, is left.
    assert node.files() == ([], [f"{A}.json"])
    assert preparer.prepare([node.add(B, result("gpus", "gpu-0"))])[B].error
    _ok(preparer.prepare([ref]))  # the kubelet's retry puts the spec in place
    _assert_converged(node, [A])


def test_a_record_whose_content_did_not_sync_fails_its_claim_and_leaves_no_file(
    node, monkeypatch
):
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    failed = _fail_next_file_fsync_in(monkeypatch, node.data / "claims")
    assert "step write checkpoint: OSError" in preparer.prepare([ref])[A].error
    assert failed and node.files() == ([], [])
    # Never recorded, so the device is free for another claim.
    _ok(preparer.prepare([node.add(B, result("gpus", "gpu-0"))]))


def _fail_next_fsync_of(monkeypatch, directory):
    """The next fsync of `directory` fails (a failing disk): the rename or unlink it was
    to make durable has happened, yet the write or remove raises."""
    real = atomicfile.fsync_dir
    failed = []

    def fsync_dir(path):
        if str(path) == str(directory) and not failed:
            failed.append(path)
            raise OSError(errno.EIO, "Input/output error")
        real(path)

    monkeypatch.setattr(atomicfile, "fsync_dir", fsync_dir)


def _memory_mirrors_disk(preparer, node):
    return sorted(preparer.prepared()) == sorted(Checkpoint(node.data).load_all()[0])


def test_a_record_on_disk_after_a_failed_write_still_books_its_device(node, monkeypatch):
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _fail_next_fsync_of(monkeypatch, node.data / "claims")
    assert "step write checkpoint: OSError" in preparer.prepare([ref])[A].error
    assert node.record_path(A).exists() and _memory_mirrors_disk(preparer, node)
    conflicting = node.add(B, result("gpus", "gpu-0"))
    assert "is exclusive and already prepared" in preparer.prepare([conflicting])[B].error
    _ok(preparer.prepare([ref]))  # the kubelet's retry completes the claim
    _assert_converged(node, [A])


def test_a_record_gone_after_a_failed_remove_is_not_answered_from_memory(node, monkeypatch):
    ref = node.add(A, result("gpus", "gpu-0"))
    preparer = node.preparer()
    _ok(preparer.prepare([ref]))
    _fail_next_fsync_of(monkeypatch, node.data / "claims")
    assert "step remove checkpoint: OSError" in preparer.unprepare([ref])[A].error
    assert not node.record_path(A).exists() and _memory_mirrors_disk(preparer, node)
    # A new pod of the claim prepares it afresh: its CDI file gets a record again.
    _ok(preparer.prepare([ref]))
    _assert_converged(node, [A])


def test_two_instances_over_one_directory_see_each_others_claims(node):
    """A rolling update runs two plugin instances over the same directories, serialized
    by one lock; each must act on what the other prepared or unprepared meanwhile."""
    lock = threading.Lock()
    old, new = node.preparer(serialize=lambda: lock), node.preparer(serialize=lambda: lock)
    taken = node.add(A, result("gpus", "gpu-0"))
    first = _ok(old.prepare([taken]))[A]
    conflicting = node.add(B, result("gpus", "gpu-0"))
    assert "is exclusive and already prepared for claim" in new.prepare([conflicting])[B].error
    assert _ok(new.prepare([taken]))[A] == first  # the recorded answer, not a new plan
    _ok(new.unprepare([taken]))
    _ok(old.prepare([conflicting]))  # the old instance saw gpu-0 become free
    assert list(old.prepared()) == [B] and A not in old.ledger
