"""Per-call work that does not grow with the node: no directory scans once started, an
incremental ledger that always agrees with one rebuilt from scratch."""

from __future__ import annotations

import os
import pathlib
import random
import threading
import uuid

import pytest

from driver.claims.allocation import parse_claim
from driver.claims.ledger import CapacityLedger
from driver.claims.plan import plan_prepare
from driver.claims.preparer import Preparer
from driver.claims.source import StaticClaimSource
from driver.claims.types import ClaimRef
from driver.devices.profiles import profile_inventory

DRIVER = "dra.example.com"
NODE = "node-a"


class Crash(BaseException):
    """A simulated process death."""


def _share(source, i, device):
    uid = str(uuid.uuid4())
    source.put({
        "metadata": {"namespace": "default", "name": f"c-{i}", "uid": uid},
        "status": {"allocation": {"devices": {"results": [{
            "request": "net", "driver": DRIVER, "pool": NODE, "device": device,
            "shareID": str(uuid.uuid4()), "consumedCapacity": {"bandwidth": "100M"}}]}}},
    })
    return ClaimRef("default", f"c-{i}", uid)


@pytest.fixture
def scans(monkeypatch):
    """Counts directory listings made by anyone in this process."""
    counted = []
    for owner, name in ((os, "listdir"), (os, "scandir"), (pathlib.Path, "iterdir")):
        real = getattr(owner, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            counted.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(owner, name, counting)
    return counted


def test_calls_never_list_the_records_once_started(tmp_path, scans):
    inventory = profile_inventory("nic", DRIVER, NODE, 2)
    source = StaticClaimSource()
    refs = [_share(source, i, f"nic-{i % 2}") for i in range(60)]
    preparer = Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data")
    assert all(not a.error for a in preparer.prepare(refs[:50]).values())
    scans.clear()

    assert not preparer.prepare([refs[50]])[refs[50].uid].error  # a new claim
    assert not preparer.prepare([refs[0]])[refs[0].uid].error  # an already prepared one
    assert not preparer.unprepare([refs[1]])[refs[1].uid].error
    unknown = ClaimRef("default", "unknown", str(uuid.uuid4()))
    assert not preparer.unprepare([unknown])[unknown.uid].error

    assert scans == []


def test_a_sibling_that_dies_mid_change_is_still_seen(tmp_path):
    """Two instances of a rolling update share the directories and the lock; the one
    that dies after writing a record but before its CDI spec must not be missed."""
    inventory = profile_inventory("gpu", DRIVER, NODE, 1)
    source = StaticClaimSource()
    refs = []
    for name in ("first", "second"):
        uid = str(uuid.uuid4())
        source.put({"metadata": {"namespace": "default", "name": name, "uid": uid},
                    "status": {"allocation": {"devices": {"results": [{
                        "request": "gpu", "driver": DRIVER, "pool": NODE,
                        "device": "gpu-0"}]}}}})
        refs.append(ClaimRef("default", name, uid))
    lock = threading.Lock()

    def make(**kwargs):
        return Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data",
                        serialize=lambda: lock, **kwargs)

    def crash(step):
        if step == "write CDI spec":
            raise Crash(step)

    survivor, dying = make(), make(fault=crash)
    with pytest.raises(Crash):
        dying.prepare([refs[0]])
    error = survivor.prepare([refs[1]])[refs[1].uid].error
    assert "exclusive and already prepared" in error
    assert not survivor.prepare([refs[0]])[refs[0].uid].error  # the kubelet's retry


def _claims(count, seed):
    """Claims over a node with partitionable GPUs (the whole GPU is exclusive) and shared
    NICs."""
    rng = random.Random(seed)
    inventory = profile_inventory("gpu-partitioned,nic", DRIVER, NODE, 2)
    devices = [d.name for d in inventory.pools[0].devices]
    claims = []
    for i in range(count):
        device = rng.choice(devices)
        result = {"request": "r", "driver": DRIVER, "pool": NODE, "device": device}
        if inventory.device(NODE, device).allows_multiple_allocations:
            result["shareID"] = str(uuid.uuid4())
            if device.startswith("nic"):
                result["consumedCapacity"] = {"bandwidth": f"{rng.randint(1, 40)}00M"}
        raw = {"metadata": {"namespace": "default", "name": f"c-{i}", "uid": str(uuid.uuid4())},
               "status": {"allocation": {"devices": {"results": [result], "config": []}}}}
        try:
            claims.append(plan_prepare(parse_claim(raw, DRIVER), inventory, DRIVER))
        except Exception:  # a combination the inventory refuses: not a ledger matter
            continue
    return claims


def _view(ledger, probes):
    keys = sorted({(u.pool, u.device) for c in probes for u in c.units})
    return (
        [sorted(ledger.check(c)) for c in probes],
        {key: ledger.used(*key) for key in keys},
        {key: len(ledger.entries(*key)) for key in keys},
        ledger.counters_used(NODE).amounts,
        ledger.counters_used(NODE).consumers,
        ledger.reserved(),
    )


@pytest.mark.parametrize("seed", range(3))
def test_incremental_ledger_always_agrees_with_a_rebuild(seed):
    rng = random.Random(seed)
    pool = _claims(120, seed)
    probes, candidates = pool[:20], pool[20:]
    ledger, held, reserved = CapacityLedger(), {}, {}
    for _ in range(300):
        action = rng.random()
        claim = rng.choice(candidates)
        uid = claim.claim.uid
        if action < 0.55 and not ledger.check(claim):
            ledger.add(claim)
            held[uid], _ = claim, reserved.pop(uid, None)
        elif action < 0.65:
            devices = [(u.pool, u.device, u.consumes_counters) for u in claim.units]
            ledger.reserve(uid, devices)
            reserved[uid], _ = devices, held.pop(uid, None)
        else:
            ledger.remove(uid)
            held.pop(uid, None)
            reserved.pop(uid, None)
        fresh = CapacityLedger.rebuild(held.values())
        for reserved_uid, devices in reserved.items():
            fresh.reserve(reserved_uid, devices)
        assert _view(ledger, probes) == _view(fresh, probes)
