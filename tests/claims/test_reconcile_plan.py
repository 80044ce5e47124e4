"""The reconciliation decision (pure): which records are leaked, and when one is due."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from driver.claims.reconcile_plan import (
    ALLOCATION_CHANGED,
    CLAIM_DELETED,
    DEALLOCATED,
    NOT_RESERVED,
    UID_CHANGED,
    InUse,
    ReconcilePolicy,
    RecordedClaim,
    Suspect,
    due_reads,
    leak_reason,
    plan_reconcile,
)
from driver.claims.types import ClaimRef

from .builders import DRIVER, GPU_POOL, NIC_POOL, OTHER_DRIVER, SHARE_1, claim, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
NODE = "node-a"
GRACE = 300.0
POLICY = ReconcilePolicy(grace=GRACE)
T0 = 1_000_000.0  # when the record was written
POD = {"resource": "pods", "name": "p", "uid": "pod-uid-1"}


def _record(uid: str = A, touched_at: float = T0) -> RecordedClaim:
    return RecordedClaim(
        ClaimRef("default", f"claim-{uid[:8]}", uid),
        frozenset({(GPU_POOL, "gpu-0", None), (NIC_POOL, "nic-0", SHARE_1)}),
        touched_at,
    )


def _in_use(uid: str = A) -> dict[str, Any]:
    """The record's claim as the API has it while a pod on this node uses it."""
    raw = claim(uid, [result("gpus", "gpu-0"), result("net", "nic-0", share=SHARE_1),
                      result("x", "dev-9", pool="p", driver=OTHER_DRIVER)])
    raw["status"]["allocation"]["nodeSelector"] = _selector("In", NODE)
    raw["status"]["reservedFor"] = [POD]
    return raw


def _selector(operator: str, *names: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": operator, "values": list(names)}]}]}


def _changed(change) -> dict[str, Any]:
    raw = copy.deepcopy(_in_use())
    change(raw)
    return raw


def _reason(raw: dict[str, Any] | None) -> str | None:
    return leak_reason(_record(), raw, driver=DRIVER, node=NODE)


def test_a_claim_reserved_and_allocated_as_recorded_is_not_leaked() -> None:
    assert _reason(_in_use()) is None
    # Reserved for anything at all (a pod of ours pinned here by the allocation, or a
    # consumer we cannot judge): in use.
    assert _reason(_changed(lambda c: c["status"].update(
        reservedFor=[{"apiGroup": "example.com", "resource": "things", "name": "t",
                      "uid": "u"}]))) is None
    # A selector on labels cannot be judged without the Node: it may select us.
    assert _reason(_changed(lambda c: c["status"]["allocation"].update(nodeSelector={
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z"]}]}]}))) is None
    assert _reason(_changed(lambda c: c["status"]["allocation"].update(
        nodeSelector=_selector("NotIn", "other-node")))) is None


@pytest.mark.parametrize(("raw", "reason"), [
    (None, CLAIM_DELETED),
    (_changed(lambda c: c["metadata"].update(uid=B)), UID_CHANGED),
    (_changed(lambda c: c["status"].pop("allocation")), DEALLOCATED),
    (_changed(lambda c: c["status"]["allocation"]["devices"]["results"].pop(0)),
     ALLOCATION_CHANGED),
    (_changed(lambda c: c["status"]["allocation"]["devices"]["results"][1].update(
        shareID="44444444-4444-4444-8444-444444444444")), ALLOCATION_CHANGED),
    (_changed(lambda c: c["status"]["allocation"].update(
        nodeSelector=_selector("In", "other-node"))), ALLOCATION_CHANGED),
    (_changed(lambda c: c["status"]["allocation"].update(
        nodeSelector=_selector("NotIn", NODE))), ALLOCATION_CHANGED),
    (_changed(lambda c: c["status"].update(reservedFor=[])), NOT_RESERVED),
    (_changed(lambda c: c["status"].pop("reservedFor")), NOT_RESERVED),
])
def test_each_reason(raw: dict[str, Any] | None, reason: str) -> None:
    assert _reason(raw) == reason


def _check(suspects, now, raw, record=None):
    record = record or _record()
    seen = {} if raw == "unreadable" else {A: raw}
    return plan_reconcile({A: record}, seen, suspects, now, driver=DRIVER, node=NODE,
                          policy=POLICY)


def _run(checks, record=None):
    """Run checks [(now, claim)...] in order; the plans."""
    suspects, plans = {}, []
    for now, raw in checks:
        plan = _check(suspects, now, raw, record)
        suspects = plan.suspects
        plans.append(plan)
    return plans


def test_a_leak_is_reclaimed_on_the_second_check_once_the_grace_period_passed() -> None:
    late = T0 + 10 * GRACE
    first, second = _run([(late, None), (late + GRACE, None)])
    assert first.reclaim == () and first.suspects[A].checks == 1
    [reclaim] = second.reclaim
    assert (reclaim.ref.uid, reclaim.reason, reclaim.since) == (A, CLAIM_DELETED, late)
    assert second.suspects == {}


def test_one_check_is_never_enough() -> None:
    plan = _check({}, T0 + 100 * GRACE, None)
    assert plan.reclaim == ()
    single = ReconcilePolicy(grace=0, min_checks=1)
    assert plan_reconcile({A: _record()}, {A: None}, {}, T0 + 1, driver=DRIVER, node=NODE,
                          policy=single).reclaim


def test_the_leak_must_last_the_grace_period() -> None:
    late = T0 + 10 * GRACE
    plans = _run([(late, None), (late + GRACE / 2, None), (late + GRACE - 1, None)])
    assert all(p.reclaim == () for p in plans)
    assert plans[-1].suspects[A].checks == 3
    assert _run([(late, None), (late + GRACE - 1, None), (late + GRACE, None)])[-1].reclaim


def test_a_young_record_is_left_alone() -> None:
    record = _record(touched_at=T0)
    plans = _run([(T0 + 1, None), (T0 + GRACE - 1, None)], record)
    assert plans[-1].reclaim == ()
    assert _run([(T0 + 1, None), (T0 + GRACE + 1, None)], record)[-1].reclaim


def test_a_check_that_sees_the_claim_in_use_starts_over() -> None:
    late = T0 + 10 * GRACE
    plans = _run([(late, None), (late + GRACE, _in_use()), (late + 2 * GRACE, None),
                  (late + 3 * GRACE - 1, None)])
    assert all(p.reclaim == () for p in plans)
    assert plans[-1].suspects[A].since == late + 2 * GRACE


def test_an_unreadable_claim_starts_over() -> None:
    late = T0 + 10 * GRACE
    plans = _run([(late, None), (late + GRACE, "unreadable"), (late + 2 * GRACE, None)])
    assert all(p.reclaim == () for p in plans)
    assert plans[1].suspects == {}


def test_a_claim_prepared_since_the_first_check_starts_over() -> None:
    late = T0 + 10 * GRACE
    first = _check({}, late, None)
    touched = _record(touched_at=late + 1)  # the kubelet prepared it again meanwhile
    second = _check(first.suspects, late + GRACE, None, touched)
    assert second.reclaim == ()
    assert second.suspects[A].since == late + GRACE and second.suspects[A].checks == 1


def test_the_reason_may_change_while_the_leak_lasts() -> None:
    late = T0 + 10 * GRACE
    not_reserved = _changed(lambda c: c["status"].update(reservedFor=[]))
    [reclaim] = _run([(late, not_reserved), (late + GRACE, None)])[-1].reclaim
    assert (reclaim.reason, reclaim.since) == (CLAIM_DELETED, late)


def test_a_claim_in_use_is_never_reclaimed_however_long() -> None:
    plans = _run([(T0 + n * GRACE, _in_use()) for n in range(1, 20)])
    assert all(p.reclaim == () and p.suspects == {} for p in plans)


def test_only_leaked_records_are_reclaimed_and_gone_records_are_forgotten() -> None:
    late = T0 + 10 * GRACE
    records = {A: _record(A), B: _record(B)}
    seen = {A: None, B: _in_use(B)}
    first = plan_reconcile(records, seen, {}, late, driver=DRIVER, node=NODE, policy=POLICY)
    assert set(first.suspects) == {A}
    gone = plan_reconcile({B: records[B]}, {B: _in_use(B)}, first.suspects, late + GRACE,
                          driver=DRIVER, node=NODE, policy=POLICY)
    assert gone.reclaim == () and gone.suspects == {}


# --- when a claim is read (the API server's load) --------------------------------------

INTERVAL = POLICY.interval


def test_a_new_record_is_first_read_one_interval_after_its_prepare() -> None:
    records = {A: _record(touched_at=T0)}
    assert due_reads(records, {}, {}, T0 + INTERVAL - 1, POLICY) == []
    assert due_reads(records, {}, {}, T0 + INTERVAL, POLICY) == [A]
    # A record from before a restart (old, never read by this process): read at once.
    assert due_reads({A: _record(touched_at=T0 - 10 * GRACE)}, {}, {}, T0, POLICY) == [A]


def test_a_suspect_is_read_on_every_check() -> None:
    records = {A: _record(touched_at=T0)}
    suspects = {A: Suspect("not_reserved", T0 + 1, 1)}
    quiet = {A: InUse(T0 + 1, POLICY.longest_wait)}
    assert due_reads(records, suspects, quiet, T0 + 2, POLICY) == [A]


def test_the_wait_doubles_while_the_claim_is_in_use_up_to_the_longest() -> None:
    waits, in_use, now = [], {}, T0 + INTERVAL
    for _ in range(8):
        plan = plan_reconcile({A: _record()}, {A: _in_use()}, {}, now, driver=DRIVER,
                              node=NODE, policy=POLICY, in_use=in_use)
        in_use = plan.in_use
        waits.append(in_use[A].wait / INTERVAL)
        now += in_use[A].wait
    assert waits == [2, 4, 8, 16, 16, 16, 16, 16]
    # A check that does not read the claim keeps its schedule; a suspect loses it.
    kept = plan_reconcile({A: _record()}, {}, {}, now, driver=DRIVER, node=NODE,
                          policy=POLICY, in_use=in_use)
    assert kept.in_use == in_use
    lost = plan_reconcile({A: _record()}, {A: None}, {}, now, driver=DRIVER, node=NODE,
                          policy=POLICY, in_use=in_use)
    assert lost.in_use == {} and A in lost.suspects


def test_a_wait_is_spread_by_up_to_a_quarter_and_a_prepare_restarts_it() -> None:
    wait = POLICY.longest_wait
    quiet = {A: InUse(T0, wait)}
    records = {A: _record(touched_at=T0 - 1)}
    assert due_reads(records, {}, quiet, T0 + 0.75 * wait - 1, POLICY) == []
    assert due_reads(records, {}, quiet, T0 + wait, POLICY) == [A]
    touched = {A: _record(touched_at=T0 + wait)}  # the kubelet prepared it again
    assert due_reads(touched, {}, quiet, T0 + wait + 1, POLICY) == []


def test_claims_in_use_are_read_about_once_per_longest_wait() -> None:
    uids = [f"{n:08x}-0000-4000-8000-{n:012x}" for n in range(200)]
    records = {uid: _record(uid, touched_at=T0 + n * 2.5) for n, uid in enumerate(uids)}
    seen_in_use = {uid: _in_use(uid) for uid in uids}
    in_use: dict[str, InUse] = {}
    reads, now, day = 0, T0, 24 * 3600
    while now < T0 + day:
        due = due_reads(records, {}, in_use, now, POLICY)
        reads += len(due)
        in_use = plan_reconcile(records, {u: seen_in_use[u] for u in due}, {}, now,
                                driver=DRIVER, node=NODE, policy=POLICY,
                                in_use=in_use).in_use
        now += INTERVAL
    # Every check read all of them before: 1,440 reads a claim a day.
    assert reads / len(uids) < day / (0.75 * POLICY.longest_wait) + 5
    assert reads / day * 1000 / len(uids) < 1.5  # per second, for 1,000 claims
