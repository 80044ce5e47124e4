"""The reconciliation decision (pure): which records are leaked, and when one is due."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from simdra._driver.claims.reconcile.plan import (
    ALLOCATION_CHANGED,
    CLAIM_DELETED,
    DEALLOCATED,
    NOT_RESERVED,
    UID_CHANGED,
    InUse,
    ReconcilePolicy,
    RecordedClaim,
    Suspect,
    brakes,
    due_reads,
    leak_reason,
    plan_reconcile,
)
from simdra._driver.claims.types import ClaimRef

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


def _check(suspects, now, raw, record=None, records=None):
    record = record or _record()
    seen = {} if raw == "unreadable" else {A: raw}
    return plan_reconcile(records or {A: record}, seen, suspects, now, driver=DRIVER,
                          node=NODE, policy=POLICY)


def _run(checks, record=None):
    """Run checks [(now, claim)...] in order; the plans."""
    suspects, plans = {}, []
    for now, raw in checks:
        plan = _check(suspects, now, raw, record)
        suspects = plan.suspects
        plans.append(plan)
    return plans


INTERVAL = POLICY.interval
LATE = T0 + 10 * GRACE  # long after the record was written


def _every_interval(count: int, raw: Any = None, start: float = LATE) -> list[tuple[float, Any]]:
    return [(start + n * INTERVAL, raw) for n in range(count)]


def test_checks_needed_follow_the_grace_and_the_interval() -> None:
    assert POLICY.min_checks == 6  # ceil(300 / 60) + 1
    assert ReconcilePolicy(grace=30, interval=2).min_checks == 16
    assert ReconcilePolicy(grace=30, interval=7).min_checks == 6  # ceil(4.3) + 1
    assert ReconcilePolicy(grace=300, interval=600).min_checks == 2


def test_a_leak_is_due_once_it_lasted_the_grace_on_every_check() -> None:
    plans = _run(_every_interval(POLICY.min_checks))
    assert all(p.reclaim == () for p in plans[:-1])
    [reclaim] = plans[-1].reclaim
    assert (reclaim.ref.uid, reclaim.reason, reclaim.touched_at) == (A, CLAIM_DELETED, T0)
    # Still a suspect until it is freed: a claim kept (report mode, in use) stays due.
    assert plans[-1].suspects[A].checks == POLICY.min_checks
    again = _check(plans[-1].suspects, LATE + POLICY.min_checks * INTERVAL, None)
    assert [r.ref.uid for r in again.reclaim] == [A]


def test_the_grace_is_needed_however_many_checks() -> None:
    # Many checks in quick succession (a restart loop, say): never before the grace.
    plans = _run([(LATE + n, None) for n in range(50)])
    assert all(p.reclaim == () for p in plans)
    assert _run([(LATE + n, None) for n in range(50)] + [(LATE + GRACE, None)])[-1].reclaim


def test_the_checks_are_needed_however_long_the_grace_lasted() -> None:
    plans = _run([(LATE, None), (LATE + 10 * GRACE, None)])
    assert all(p.reclaim == () for p in plans)


def test_a_check_that_sees_the_claim_in_use_starts_over() -> None:
    n = POLICY.min_checks
    restart = LATE + (n + 1) * INTERVAL
    plans = _run([*_every_interval(n - 1), (LATE + n * INTERVAL, _in_use()),
                  *_every_interval(n - 1, start=restart)])
    assert all(p.reclaim == () for p in plans)
    assert plans[-1].suspects[A].since == LATE + (n + 1) * INTERVAL


def test_an_unreadable_claim_starts_over() -> None:
    n = POLICY.min_checks
    restart = LATE + (n + 1) * INTERVAL
    plans = _run([*_every_interval(n - 1), (LATE + n * INTERVAL, "unreadable"),
                  *_every_interval(n - 1, start=restart)])
    assert all(p.reclaim == () for p in plans)
    assert plans[n - 1].suspects == {}


def test_a_claim_prepared_since_the_first_check_starts_over() -> None:
    plans = _run(_every_interval(POLICY.min_checks - 1))
    touched = _record(touched_at=LATE + 1)  # the kubelet prepared it again meanwhile
    last = LATE + POLICY.min_checks * INTERVAL
    second = _check(plans[-1].suspects, last, None, touched)
    assert second.reclaim == ()
    assert second.suspects[A].since == last and second.suspects[A].checks == 1


def test_a_step_of_the_wall_clock_changes_nothing() -> None:
    # The touch stamp is compared for equality: a record touched at a wall time
    # *earlier* than the first check (the clock stepped back) still counts as touched.
    plans = _run(_every_interval(POLICY.min_checks - 1))
    stepped_back = _record(touched_at=T0 - 3600)
    last = _check(plans[-1].suspects, LATE + POLICY.min_checks * INTERVAL, None, stepped_back)
    assert last.reclaim == () and last.suspects[A].checks == 1


def test_the_reason_may_change_while_the_leak_lasts() -> None:
    not_reserved = _changed(lambda c: c["status"].update(reservedFor=[]))
    checks = _every_interval(POLICY.min_checks - 1, not_reserved)
    [reclaim] = _run([*checks, (LATE + GRACE, None)])[-1].reclaim
    assert reclaim.reason == CLAIM_DELETED


def test_a_claim_in_use_is_never_reclaimed_however_long() -> None:
    plans = _run([(T0 + n * GRACE, _in_use()) for n in range(1, 20)])
    assert all(p.reclaim == () and p.suspects == {} for p in plans)


def test_a_claim_reserved_for_a_pod_group_is_in_use() -> None:
    # DRAWorkloadResourceClaims: the claim names the PodGroup, not its pods.
    group = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g",
             "uid": "group-uid"}
    raw = _changed(lambda c: c["status"].update(reservedFor=[group]))
    plans = _run(_every_interval(3 * POLICY.min_checks, raw))
    assert all(p.reclaim == () and p.suspects == {} for p in plans)


@pytest.mark.parametrize(("change", "reason"), [
    (lambda c: c["status"].pop("allocation"), DEALLOCATED),
    (lambda c: c["status"]["allocation"]["devices"]["results"].pop(0), ALLOCATION_CHANGED),
    (lambda c: c["metadata"].update(uid=B), UID_CHANGED),
])
def test_a_pod_group_reservation_does_not_hide_a_changed_claim(change, reason) -> None:
    # The reservation says the claim is in use, not that it is the claim we prepared.
    group = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "g",
             "uid": "group-uid"}

    def both(raw: dict[str, Any]) -> None:
        raw["status"]["reservedFor"] = [group]
        change(raw)

    assert _reason(_changed(both)) == reason


def test_only_leaked_records_are_reclaimed_and_gone_records_are_forgotten() -> None:
    records = {A: _record(A), B: _record(B)}
    seen = {A: None, B: _in_use(B)}
    first = plan_reconcile(records, seen, {}, LATE, driver=DRIVER, node=NODE, policy=POLICY)
    assert set(first.suspects) == {A}
    gone = plan_reconcile({B: records[B]}, {B: _in_use(B)}, first.suspects, LATE + GRACE,
                          driver=DRIVER, node=NODE, policy=POLICY)
    assert gone.reclaim == () and gone.suspects == {}


def _uids(count: int) -> list[str]:
    return [f"{n:08x}-0000-4000-8000-{n:012x}" for n in range(count)]


def _mass_leak(leaked: int, total: int) -> tuple[bool, int]:
    """`leaked` of `total` records look gone on every check: (braked, freed at the end)."""
    uids = _uids(total)
    records = {u: _record(u) for u in uids}
    seen = {u: (None if n < leaked else _in_use(u)) for n, u in enumerate(uids)}
    suspects: dict[str, Suspect] = {}
    for now, _ in _every_interval(POLICY.min_checks):
        plan = plan_reconcile(records, seen, suspects, now, driver=DRIVER, node=NODE,
                              policy=POLICY)
        suspects = plan.suspects
    return plan.braked, len(plan.reclaim)


@pytest.mark.parametrize(("leaked", "total", "braked"), [
    (1, 1, False),  # one leak on a node with one claim: the ordinary case
    (2, 2, False),
    (3, 3, True),  # every record at once: a wrong cluster, an empty etcd
    (3, 20, False),  # 15 %
    (6, 20, True),  # 30 %
    (10, 100, False),
    (11, 100, True),  # more than the fixed count, however small a share
])
def test_the_brake_frees_none_when_too_many_look_leaked_at_once(
        leaked: int, total: int, braked: bool) -> None:
    assert _mass_leak(leaked, total) == (braked, 0 if braked else leaked)
    assert brakes(leaked, total) is braked


def test_reads_still_due_count_toward_the_brake() -> None:
    # Two claims answer 404, the third's read was due and failed on every check: three
    # in doubt of three is a wrong cluster, not two leaks. A record not due is not.
    uids = _uids(3)
    records = {u: _record(u) for u in uids}
    seen = {uids[0]: None, uids[1]: None}
    for due, braked in ((uids, True), (uids[:2], False)):
        suspects: dict[str, Suspect] = {}
        for now, _ in _every_interval(POLICY.min_checks):
            plan = plan_reconcile(records, seen, suspects, now, driver=DRIVER, node=NODE,
                                  policy=POLICY, due=due)
            suspects = plan.suspects
        assert (plan.braked, plan.unread, plan.doubtful) == (braked, len(due) - 2, len(due))
        assert len(plan.reclaim) == (0 if braked else 2)


# --- when a claim is read (the API server's load) --------------------------------------


def test_a_new_record_is_first_read_one_interval_after_its_prepare() -> None:
    records = {A: _record(touched_at=T0)}
    assert due_reads(records, {}, {}, T0 + INTERVAL - 1, POLICY, T0 + INTERVAL - 1) == []
    assert due_reads(records, {}, {}, T0 + INTERVAL, POLICY, T0 + INTERVAL) == [A]
    # A record from before a restart (old, never read by this process): read at once.
    assert due_reads({A: _record(touched_at=T0 - 10 * GRACE)}, {}, {}, T0, POLICY, T0) == [A]


def test_a_suspect_is_read_on_every_check() -> None:
    records = {A: _record(touched_at=T0)}
    suspects = {A: Suspect("not_reserved", T0 + 1, 1, T0)}
    quiet = {A: InUse(T0 + 1, POLICY.longest_wait)}
    assert due_reads(records, suspects, quiet, T0 + 2, POLICY, T0 + 2) == [A]


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
    assert due_reads(records, {}, quiet, T0 + 0.75 * wait - 1, POLICY, T0 + 0.75 * wait - 1) == []
    assert due_reads(records, {}, quiet, T0 + wait, POLICY, T0 + wait) == [A]
    touched = {A: _record(touched_at=T0 + wait)}  # the kubelet prepared it again
    assert due_reads(touched, {}, quiet, T0 + wait + 1, POLICY, T0 + wait + 1) == []


def test_claims_in_use_are_read_about_once_per_longest_wait() -> None:
    uids = [f"{n:08x}-0000-4000-8000-{n:012x}" for n in range(200)]
    records = {uid: _record(uid, touched_at=T0 + n * 2.5) for n, uid in enumerate(uids)}
    seen_in_use = {uid: _in_use(uid) for uid in uids}
    in_use: dict[str, InUse] = {}
    reads, now, day = 0, T0, 24 * 3600
    while now < T0 + day:
        due = due_reads(records, {}, in_use, now, POLICY, now)
        reads += len(due)
        in_use = plan_reconcile(records, {u: seen_in_use[u] for u in due}, {}, now,
                                driver=DRIVER, node=NODE, policy=POLICY,
                                in_use=in_use).in_use
        now += INTERVAL
    # Every check read all of them before: 1,440 reads a claim a day.
    assert reads / len(uids) < day / (0.75 * POLICY.longest_wait) + 5
    assert reads / day * 1000 / len(uids) < 1.5  # per second, for 1,000 claims


def test_the_first_read_waits_on_the_monotonic_clock_whatever_the_wall_clock_says() -> None:
    # The record's age is read once from the wall clock; the wait runs on the monotonic.
    records = {A: _record(touched_at=T0)}
    mono = 50.0  # the monotonic clock has its own origin
    assert due_reads(records, {}, {}, mono, POLICY, T0 + INTERVAL - 1) == []
    assert due_reads(records, {}, {}, mono, POLICY, T0 + INTERVAL) == [A]
