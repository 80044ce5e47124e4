"""Per-call work that does not grow with the node: no directory scans once started, an
incremental ledger that always agrees with one rebuilt from scratch."""

from __future__ import annotations

import os
import pathlib
import random
import threading
import uuid

import pytest

from simdra._driver.builtins import builtin_kinds
from simdra._driver.claims.ledger import CapacityLedger
from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.prepare.transaction import Preparer
from simdra._driver.claims.source import StaticClaimSource
from simdra._driver.claims.types import ClaimRef
from simdra._driver.devices.profiles import profile_inventory
from tests.claims.builders import RULES

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
    inventory = profile_inventory("nic", DRIVER, NODE, 2, kinds=builtin_kinds())
    source = StaticClaimSource()
    refs = [_share(source, i, f"nic-{i % 2}") for i in range(60)]
    preparer = Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data",
                        rules=RULES)
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
    inventory = profile_inventory("gpu", DRIVER, NODE, 1, kinds=builtin_kinds())
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
    inventory = profile_inventory("gpu-partitioned,nic", DRIVER, NODE, 2, kinds=builtin_kinds())
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
            claims.append(plan_prepare(parse_claim(raw, DRIVER), inventory, DRIVER, rules=RULES))
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


class _HeldLock:
    """The serialize lock, held by the test until every call has queued."""

    def __init__(self):
        self.lock = threading.Lock()
        self.asked = threading.Event()  # a batch is about to take the lock

    def __call__(self):
        self.asked.set()
        return self.lock


def _concurrent_prepares(tmp_path, monkeypatch, count, fault=None):
    from simdra._driver import atomicfile

    inventory = profile_inventory("nic", DRIVER, NODE, 2, kinds=builtin_kinds())
    source = StaticClaimSource()
    refs = [_share(source, i, f"nic-{i % 2}") for i in range(count)]
    held = _HeldLock()
    preparer = Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data",
                        serialize=held, fault=fault, rules=RULES)
    events = []
    real_fsync, real_replace, real_file_fsync = atomicfile.fsync_dir, os.replace, os.fsync

    def fsync_dir(path):
        events.append(("fsync", pathlib.Path(path).name))
        real_fsync(path)

    def file_fsync(fd):
        name = pathlib.Path(os.readlink(f"/proc/self/fd/{fd}")).name
        real_file_fsync(fd)
        if name.startswith("."):  # a file's content, not a directory
            events.append(("synced", name))

    def replace(src, dst):
        events.append(("rename", pathlib.Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(atomicfile, "fsync_dir", fsync_dir)
    monkeypatch.setattr(atomicfile.os, "replace", replace)
    monkeypatch.setattr(atomicfile.os, "fsync", file_fsync)
    answers, errors = {}, []

    def call(ref):
        try:
            answers.update(preparer.prepare([ref]))
        except BaseException as exc:  # a simulated crash reaches every caller of the batch
            errors.append(exc)

    held.asked.clear()  # set by the preparer's start-up
    held.lock.acquire()
    threads = [threading.Thread(target=call, args=(ref,)) for ref in refs]
    threads[0].start()
    assert held.asked.wait(30)  # the first call leads a batch of its own
    for thread in threads[1:]:
        thread.start()
    while preparer._prepares.waiting < count - 1:  # the others queue behind it
        threading.Event().wait(0.001)
    held.lock.release()
    for thread in threads:
        thread.join(30)
    return refs, answers, errors, events


def test_concurrent_prepares_share_their_directory_fsyncs(tmp_path, monkeypatch):
    refs, answers, errors, events = _concurrent_prepares(tmp_path, monkeypatch, 10)
    assert errors == [] and all(not answers[r.uid].error for r in refs)
    fsyncs = [name for kind, name in events if kind == "fsync"]
    # The first call alone, then the nine that queued meanwhile: two batches.
    assert fsyncs == ["claims", "cdi", "claims", "cdi"]
    for ref in refs:  # each record was durable before its CDI spec was in place
        record = events.index(("rename", f"{ref.uid}.json"))
        spec = events.index(("rename", f"k8s.{DRIVER}-device_{ref.uid}.json"))
        assert ("fsync", "claims") in events[record:spec]
    # Every file's content was durable before any file of its batch took its name.
    second_batch = events[events.index(("fsync", "cdi")) + 1:]
    first_rename = next(i for i, e in enumerate(second_batch) if e[0] == "rename")
    synced = [name for kind, name in second_batch[:first_rename] if kind == "synced"]
    renamed = [name for kind, name in second_batch if kind == "rename"]
    assert len(renamed) == 18 and all(
        any(temp.startswith(f".{name}.") for temp in synced) for name in renamed)


def test_a_crash_in_the_middle_of_a_batch_converges_after_restart(tmp_path, monkeypatch):
    specs = []

    def crash_at_third_spec(step):
        if step == "write CDI spec":
            specs.append(step)
            if len(specs) == 4:  # the first batch had one claim; this is the third of nine
                raise Crash(step)

    refs, _answers, errors, _ = _concurrent_prepares(
        tmp_path, monkeypatch, 10, fault=crash_at_third_spec)
    assert len(errors) == 9 and all(isinstance(e, Crash) for e in errors)
    monkeypatch.undo()
    inventory = profile_inventory("nic", DRIVER, NODE, 2, kinds=builtin_kinds())
    source = StaticClaimSource()
    restarted = Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data",
                         rules=RULES)
    records = {p.stem for p in (tmp_path / "data" / "claims").glob("*.json")}
    spec_uids = {p.name.split("_", 1)[1][:-5] for p in (tmp_path / "cdi").iterdir()}
    assert records == spec_uids == {r.uid for r in refs}  # every record got its spec back
    assert sorted(restarted.prepared()) == sorted(records)


def test_concurrent_unprepares_share_their_directory_fsyncs(tmp_path, monkeypatch):
    from simdra._driver import atomicfile

    refs, _answers, _errors, _ = _concurrent_prepares(tmp_path, monkeypatch, 6)
    monkeypatch.undo()
    inventory = profile_inventory("nic", DRIVER, NODE, 2, kinds=builtin_kinds())
    held = _HeldLock()
    preparer = Preparer(DRIVER, StaticClaimSource(), lambda: inventory, tmp_path / "cdi",
                        tmp_path / "data", serialize=held, rules=RULES)
    fsyncs = []
    real = atomicfile.fsync_dir
    monkeypatch.setattr(atomicfile, "fsync_dir",
                        lambda path: (fsyncs.append(pathlib.Path(path).name), real(path)))
    held.asked.clear()
    held.lock.acquire()
    answers = {}
    threads = [threading.Thread(target=lambda r=ref: answers.update(preparer.unprepare([r])))
               for ref in refs]
    threads[0].start()
    assert held.asked.wait(30)
    for thread in threads[1:]:
        thread.start()
    while preparer._prepares.waiting + preparer._unprepares.waiting < len(refs) - 1:
        threading.Event().wait(0.001)
    held.lock.release()
    for thread in threads:
        thread.join(30)
    assert all(not answers[r.uid].error for r in refs)
    assert fsyncs == ["cdi", "claims", "cdi", "claims"]  # specs first, in two batches
    assert list((tmp_path / "cdi").iterdir()) == []
    assert list((tmp_path / "data" / "claims").glob("*.json")) == []


def test_calls_that_change_nothing_sync_nothing(tmp_path, monkeypatch):
    from simdra._driver import atomicfile

    inventory = profile_inventory("nic", DRIVER, NODE, 2, kinds=builtin_kinds())
    source = StaticClaimSource()
    refs = [_share(source, i, f"nic-{i % 2}") for i in range(5)]
    preparer = Preparer(DRIVER, source, lambda: inventory, tmp_path / "cdi", tmp_path / "data",
                        rules=RULES)
    assert all(not a.error for a in preparer.prepare(refs).values())
    syncs = []
    real_fsync, real_dir = os.fsync, atomicfile.fsync_dir
    monkeypatch.setattr(os, "fsync", lambda fd: (syncs.append(fd), real_fsync(fd)))
    monkeypatch.setattr(atomicfile, "fsync_dir", lambda p: (syncs.append(p), real_dir(p)))

    unknown = ClaimRef("default", "unknown", str(uuid.uuid4()))
    assert not preparer.unprepare([unknown])[unknown.uid].error
    assert preparer.prepare(refs[:2]) == preparer.prepare(refs[:2])  # already prepared

    assert syncs == []
