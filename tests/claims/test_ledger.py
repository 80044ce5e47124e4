"""The capacity ledger: exclusivity, exact shared capacity, admin access."""

from __future__ import annotations

from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.devices.model import Device, Inventory, Pool
from tests.claims.builders import RULES

from .builders import DRIVER, NIC_POOL, SHARE_1, SHARE_2, SHARE_3, claim, inventory, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
C = "cccccccc-0000-4000-8000-000000000003"


def _prepared(uid, *results):
    return plan_prepare(parse_claim(claim(uid, list(results)), DRIVER), inventory(), DRIVER,
                        rules=RULES)


def _share(share, amount, request="net"):
    return result(request, "nic-0", share=share, consumed={"bandwidth": amount})


def test_exclusive_device_is_never_prepared_for_two_claims():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, result("gpus", "gpu-0")))
    problems = ledger.check(_prepared(B, result("gpus", "gpu-0")))
    assert problems == [f"device node-a/gpu-0 is exclusive and already prepared for claim {A}"]
    assert ledger.check(_prepared(B, result("gpus", "gpu-1"))) == []
    # Re-checking the holder itself finds nothing.
    assert ledger.check(_prepared(A, result("gpus", "gpu-0"))) == []


def test_shared_capacity_up_to_exactly_the_total_then_refused_with_numbers():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, _share(SHARE_1, "6G")))
    exact = _prepared(B, _share(SHARE_2, "3999M"), _share(SHARE_3, "1M", request="net2"))
    assert ledger.check(exact) == []  # 6G + 3999M + 1M == 10G exactly
    ledger.add(exact)
    assert ledger.used(NIC_POOL, "nic-0") == {"bandwidth": 10_000_000_000}
    more = "dddddddd-0000-4000-8000-000000000004"
    (problem,) = ledger.check(_prepared(C, _share(more, "1M")))
    assert problem.startswith(f"device {NIC_POOL}/nic-0 capacity bandwidth: total 10G")
    assert "used 10G by 3 other share(s)" in problem
    assert f"asked 1M (share {more})" in problem
    assert "1M over capacity" in problem


def test_shares_of_one_claim_are_summed_together():
    ledger = CapacityLedger()
    problems = ledger.check(_prepared(A, _share(SHARE_1, "6G"), _share(SHARE_2, "5G", "net2")))
    assert len(problems) == 1
    assert "used 0 by 0 other share(s), asked 11G" in problems[0]


def test_admin_access_consumes_nothing_and_blocks_nobody():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, result("watch", "gpu-0", admin=True)))
    assert ledger.check(_prepared(B, result("gpus", "gpu-0"))) == []
    ledger.add(_prepared(B, result("gpus", "gpu-0")))
    assert ledger.check(_prepared(C, result("watch", "gpu-0", admin=True))) == []
    ledger.add(_prepared(C, result("net", "nic-0", share=SHARE_1, consumed={"bandwidth": "10G"})))
    admin_share = result("watch", "nic-0", share=SHARE_2, consumed={"bandwidth": "10G"}, admin=True)
    assert ledger.check(_prepared(A, admin_share)) == []
    assert ledger.used(NIC_POOL, "nic-0") == {"bandwidth": 10_000_000_000}


def test_remove_frees_the_device_and_rebuild_restores_the_same_state():
    first, second = _prepared(A, _share(SHARE_1, "9G")), _prepared(B, result("g", "gpu-0"))
    ledger = CapacityLedger.rebuild([first, second])
    assert B in ledger and ledger.used(NIC_POOL, "nic-0") == {"bandwidth": 9_000_000_000}
    assert ledger.check(_prepared(C, _share(SHARE_2, "2G"))) != []
    ledger.remove(A)
    ledger.remove("unknown-uid")
    assert A not in ledger
    assert ledger.check(_prepared(C, _share(SHARE_2, "2G"))) == []
    assert [e.claim_uid for e in ledger.entries("node-a", "gpu-0")] == [B]


def _counted_inventory():
    """One pool: a shared NIC and an exclusive GPU drawing on the same counter set."""
    consumes = [{"counterSet": "power", "counters": {"watts": {"value": "60"}}}]
    shared = Device(
        spec={
            "name": "nic-0",
            "allowMultipleAllocations": True,
            "capacity": {"bandwidth": {"value": "10G"}},
            "consumesCounters": consumes,
        }
    )
    exclusive = Device(spec={"name": "gpu-0", "consumesCounters": consumes})
    sets = ({"name": "power", "counters": {"watts": {"value": "100"}}},)
    return Inventory(pools=(Pool("node-a", (shared, exclusive), sets),))


def _counted(uid, *results):
    parsed = parse_claim(claim(uid, list(results)), DRIVER)
    return plan_prepare(parsed, _counted_inventory(), DRIVER, rules=RULES)


def test_a_device_consumes_its_counters_once_however_many_shares_it_has():
    def share(share_id, request="net"):
        return result(request, "nic-0", pool="node-a", share=share_id, consumed={"bandwidth": "1G"})

    ledger = CapacityLedger()
    first = _counted(A, share(SHARE_1), share(SHARE_2, "net2"))
    assert ledger.check(first) == []
    ledger.add(first)
    assert ledger.check(_counted(B, share(SHARE_3))) == []  # nic-0 is counted already
    assert ledger.counters_used("node-a").amounts == {"power": {"watts": 60}}
    (problem,) = ledger.check(_counted(C, result("g", "gpu-0", pool="node-a")))
    assert problem == (
        "pool node-a counter set power counter watts: total 100, used 60 by device(s) nic-0, "
        "asked 60 by device(s) gpu-0: 20 over"
    )
    ledger.remove(A)
    assert ledger.check(_counted(C, result("g", "gpu-0", pool="node-a"))) == []


def test_devices_in_use_follow_prepares_unprepares_and_unreadable_records():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, _share(SHARE_1, "1G")))
    ledger.add(_prepared(B, _share(SHARE_2, "1G"), result("gpus", "gpu-0")))
    ledger.reserve(C, [("node-a", "gpu-1", {})])  # an unreadable record holds it
    assert ledger.devices_in_use() == {(NIC_POOL, "nic-0"), ("node-a", "gpu-0"),
                                       ("node-a", "gpu-1")}
    ledger.remove(B)  # nic-0 stays: A's share is still on it
    ledger.remove(C)
    assert ledger.devices_in_use() == {(NIC_POOL, "nic-0")}
