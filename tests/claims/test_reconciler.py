"""Reconciliation over real directories: a leaked record is unprepared as the kubelet
would, its device becomes preparable again, and a claim in use is never touched."""

from __future__ import annotations

import logging
import time

import pytest

from driver.claims.preparer import Preparer
from driver.claims.reconcile_plan import CLAIM_DELETED, NOT_RESERVED, Reclaim, ReconcilePolicy
from driver.claims.reconciler import ClaimReconciler
from driver.claims.source import StaticClaimSource
from driver.claims.types import ClaimRef

from .builders import DRIVER, GPU_POOL, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
POD = {"resource": "pods", "name": "p", "uid": "pod-uid-1"}


class Node:
    """A node's directories, the API's claims, one preparer and its reconciler."""

    def __init__(self, tmp_path, grace: float = 0.0, interval: float = 1e-6,
                 clock=time.time) -> None:
        self.source = StaticClaimSource()
        self.cdi = tmp_path / "cdi"
        self.data = tmp_path / "data"
        self.preparer = Preparer(DRIVER, self.source, lambda: inventory(gpus=1, nics=0),
                                 self.cdi, self.data)
        self.reclaimed: list[tuple[str, str]] = []
        self.reconciler = ClaimReconciler(
            self.preparer, self.source, driver=DRIVER, node=GPU_POOL,
            policy=ReconcilePolicy(grace=grace, interval=interval), clock=clock,
            on_reclaimed=lambda ref, reason: self.reclaimed.append((ref.uid, reason)))

    def add(self, uid: str, reserved: bool = True) -> ClaimRef:
        raw = claim(uid, [result("gpus", "gpu-0")])
        raw["status"]["reservedFor"] = [POD] if reserved else []
        self.source.put(raw)
        return ClaimRef("default", raw["metadata"]["name"], uid)

    def delete(self, ref: ClaimRef) -> None:
        del self.source.claims[(ref.namespace, ref.name)]

    def files(self) -> tuple[list[str], list[str]]:
        return (sorted(p.name for p in self.cdi.iterdir()),
                sorted(p.name for p in (self.data / "claims").iterdir()))


def _error(answers, uid):
    return answers[uid].error


def test_a_leaked_records_device_is_preparable_again_after_reconciliation(tmp_path, caplog):
    node = Node(tmp_path)
    leaked = node.add(A)
    assert not _error(node.preparer.prepare([leaked]), A)
    node.delete(leaked)  # the kubelet lost its state: it will never unprepare A
    new = node.add(B)
    assert "exclusive and already prepared" in _error(node.preparer.prepare([new]), B)

    assert node.reconciler.check() == []  # one check is never enough
    with caplog.at_level(logging.INFO, logger="driver.claims.reconciler"):
        [done] = node.reconciler.check()

    assert (done.ref, done.reason) == (leaked, CLAIM_DELETED)
    assert node.reclaimed == [(A, CLAIM_DELETED)]
    assert node.files() == ([], [])
    assert node.preparer.ledger.devices_in_use() == frozenset()
    [line] = [r.getMessage() for r in caplog.records if r.name == "driver.claims.reconciler"]
    assert f"default/{leaked.name}" in line and CLAIM_DELETED in line
    assert not _error(node.preparer.prepare([new]), B)
    assert node.preparer.unprepare([leaked])[A].error == ""  # the kubelet's late call


def test_a_claim_in_use_is_never_reconciled(tmp_path):
    node = Node(tmp_path)
    ref = node.add(A)
    assert not _error(node.preparer.prepare([ref]), A)
    for _ in range(5):
        assert node.reconciler.check() == []
    assert set(node.preparer.prepared()) == {A}
    assert node.reclaimed == []


def test_a_prepare_between_checks_keeps_the_claim(tmp_path):
    node = Node(tmp_path)
    ref = node.add(A, reserved=False)
    assert not _error(node.preparer.prepare([ref]), A)
    assert node.reconciler.check() == []  # suspected: not reserved
    assert not _error(node.preparer.prepare([ref]), A)  # a pod uses it after all
    assert node.reconciler.check() == []  # starts over
    assert set(node.preparer.prepared()) == {A}
    [done] = node.reconciler.check()  # still unreserved on two checks since
    assert done.reason == NOT_RESERVED


def test_reclaim_skips_a_claim_prepared_after_it_was_judged(tmp_path):
    # The guard the serialized section applies, whatever the plan said: a prepare that
    # answers from the record after `since` wins.
    node = Node(tmp_path)
    ref = node.add(A)
    assert not _error(node.preparer.prepare([ref]), A)
    since = time.time()
    time.sleep(0.01)
    assert not _error(node.preparer.prepare([ref]), A)
    assert node.preparer.reclaim([Reclaim(ref, CLAIM_DELETED, since)]) == {}
    assert set(node.preparer.prepared()) == {A}
    later = time.time() + 1
    assert node.preparer.reclaim([Reclaim(ref, CLAIM_DELETED, later)])[A].error == ""
    assert node.files() == ([], [])


def test_a_record_younger_than_the_grace_period_is_kept(tmp_path):
    node = Node(tmp_path, grace=3600)
    ref = node.add(A)
    assert not _error(node.preparer.prepare([ref]), A)
    node.delete(ref)
    for _ in range(3):
        assert node.reconciler.check() == []
    assert set(node.preparer.prepared()) == {A}


@pytest.mark.parametrize("failure", [RuntimeError("API down")])
def test_an_unreadable_claim_is_left_alone(tmp_path, failure):
    node = Node(tmp_path)
    ref = node.add(A)
    assert not _error(node.preparer.prepare([ref]), A)

    def broken(namespace, name):
        raise failure

    node.source.get = broken  # type: ignore[method-assign]
    for _ in range(3):
        assert node.reconciler.check() == []
    assert set(node.preparer.prepared()) == {A}


def test_claims_are_read_when_due_not_on_every_check(tmp_path):
    # The API server's load: a claim just prepared was read by its prepare; one found in
    # use is read again after twice the wait before, up to the longest wait.
    now = [time.time()]
    node = Node(tmp_path, interval=60, clock=lambda: now[0])
    reads: list[str] = []
    get = node.source.get

    def counting(namespace, name):
        reads.append(name)
        return get(namespace, name)

    node.source.get = counting  # type: ignore[method-assign]
    ref = node.add(A)
    assert not _error(node.preparer.prepare([ref]), A)
    prepared = len(reads)

    def reads_at(offset: float, reclaimed: int = 0) -> int:
        now[0] = time.time() + offset
        before = len(reads)
        assert len(node.reconciler.check()) == reclaimed
        return len(reads) - before

    assert reads_at(0) == 0  # its prepare has just read it
    assert reads_at(61) == 1  # one interval later
    assert reads_at(61 + 60) == 0  # next wait: two intervals, at most a quarter less
    assert reads_at(61 + 120) == 1
    assert prepared == 1
    node.delete(ref)  # leaked while quiet: read within the wait, then on every check
    assert reads_at(61 + 120 + 240) == 1
    assert reads_at(61 + 120 + 240 + 60, reclaimed=1) == 1
    assert node.reclaimed == [(A, CLAIM_DELETED)]
