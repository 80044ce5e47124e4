"""Compatibility groups at prepare (KEP-5963): the ledger refuses to prepare devices of
one counter set side by side unless they share a group, as the scheduler refuses to
allocate them; the groups survive in the checkpoint record."""

from __future__ import annotations

from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.store.record import from_payload, to_payload
from simdra._driver.claims.types import ClaimRef
from simdra._driver.devices.model import Device, Inventory, Pool
from tests.claims.builders import RULES

from .builders import DRIVER, claim, result

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"
SET = "gpu-0-counters"


def _device(name: str, memory: str, groups: list[str] | None) -> Device:
    consumption: dict[str, object] = {"counterSet": SET, "counters": {"memory": {"value": memory}}}
    if groups is not None:
        consumption["compatibilityGroups"] = groups
    return Device(spec={"name": name, "consumesCounters": [consumption]})


def _inventory() -> Inventory:
    """One GPU's 80Gi in two modes: whole-memory partitions and time-sliced shares, plus
    a partition and a share that declare no group."""
    devices = (
        _device("part-0", "40Gi", ["mig"]),
        _device("part-1", "20Gi", ["mig"]),
        _device("share-0", "10Gi", ["time-sliced"]),
        _device("share-1", "10Gi", ["time-sliced", "mig"]),
        _device("plain-0", "10Gi", None),
        _device("plain-1", "10Gi", None),
    )
    counters = ({"name": SET, "counters": {"memory": {"value": "80Gi"}}},)
    return Inventory(pools=(Pool("node-a", devices, counters),))


def _prepared(uid: str, *devices: str):  # type: ignore[no-untyped-def]
    results = [result(f"r{i}", d, pool="node-a") for i, d in enumerate(devices)]
    return plan_prepare(parse_claim(claim(uid, results, name="job"), DRIVER), _inventory(), DRIVER,
                        rules=RULES)


def test_a_share_is_refused_next_to_a_partition_of_another_mode_with_one_line():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, "part-0"))

    (problem,) = ledger.check(_prepared(B, "share-0"))
    assert problem == (
        "pool node-a counter set gpu-0-counters: device(s) share-0 (groups time-sliced) "
        "cannot be used next to device(s) part-0 (groups mig) in use: no compatibility "
        "group in common")
    assert "\n" not in problem
    # The counters alone had room (40Gi + 10Gi of 80Gi): only the groups refuse it.
    assert ledger.counters_used("node-a").amounts == {SET: {"memory": 40 * 2**30}}


def test_devices_sharing_a_group_are_prepared_side_by_side():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, "part-0"))
    assert ledger.check(_prepared(B, "part-1")) == []
    assert ledger.check(_prepared(B, "share-1")) == []  # in both groups, mig included


def test_one_claim_of_two_modes_is_refused_by_itself():
    (problem,) = CapacityLedger().check(_prepared(A, "part-0", "share-0"))
    assert "part-0 (groups mig), share-0 (groups time-sliced)" in problem


def test_no_groups_only_next_to_no_groups():
    ledger = CapacityLedger()
    ledger.add(_prepared(A, "plain-0"))
    assert ledger.check(_prepared(B, "plain-1")) == []
    (problem,) = ledger.check(_prepared(B, "part-1"))
    assert "part-1 (groups mig)" in problem and "plain-0 (groups none)" in problem


def test_freeing_the_other_mode_lets_the_share_in_and_rebuild_keeps_the_groups():
    first = _prepared(A, "part-0")
    restored = from_payload(to_payload(first))
    assert restored.units[0].counter_groups == {SET: ("mig",)}
    ledger = CapacityLedger.rebuild([restored])
    assert ledger.check(_prepared(B, "share-0")) != []
    ledger.remove(A)
    assert ledger.check(_prepared(B, "share-0")) == []


def test_a_record_without_groups_is_written_as_before():
    payload = to_payload(_prepared(A, "plain-0"))
    assert "counterGroups" not in str(payload)
    assert from_payload(payload).units[0].counter_groups == {}


def test_prepare_answers_the_second_mode_with_one_line_naming_claim_devices_groups(tmp_path):
    source = StaticClaimSource()
    preparer = Preparer(DRIVER, source, _inventory, tmp_path / "cdi", tmp_path / "data",
                        rules=RULES)
    refs = []
    for uid, device in ((A, "part-0"), (B, "share-0")):
        raw = claim(uid, [result("gpu", device, pool="node-a")], name=f"job-{device}")
        source.put(raw)
        refs.append(ClaimRef("default", raw["metadata"]["name"], uid))

    assert not preparer.prepare([refs[0]])[A].error
    error = preparer.prepare([refs[1]])[B].error
    assert "\n" not in error
    assert "default/job-share-0" in error and B in error
    assert "share-0 (groups time-sliced)" in error and "part-0 (groups mig)" in error
    assert not (tmp_path / "cdi" / f"k8s.{DRIVER}-device_{B}.json").exists()
