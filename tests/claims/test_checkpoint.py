"""Durable claim records: round trip, corrupt records reported and kept."""

from __future__ import annotations

import json

import pytest

from simdra._driver.claims.plan.allocation import parse_claim
from simdra._driver.claims.plan.prepared import plan_prepare
from simdra._driver.claims.store.checkpoint import Checkpoint
from simdra._driver.claims.store.record import RECORD_KIND, record_checksum, to_payload
from tests.claims.builders import RULES

from .builders import (
    DRIVER,
    SHARE_1,
    ProfileCluster,
    claim,
    config_entry,
    inventory,
    nic_config,
    result,
    wants,
    with_profile,
)

A = "aaaaaaaa-0000-4000-8000-000000000001"
B = "bbbbbbbb-0000-4000-8000-000000000002"


def _prepared(uid):
    results = [
        result("gpus", "gpu-0"),
        result("net/sub", "nic-0", share=SHARE_1, consumed={"bandwidth": "1500m"}),
    ]
    return plan_prepare(parse_claim(claim(uid, results), DRIVER), inventory(), DRIVER, rules=RULES)


def test_every_change_shows_in_the_stamp_of_a_sibling_even_after_its_file_was_removed(tmp_path):
    # A rolling update's two instances share the data directory: each compares the
    # other's generation token before trusting its records in memory.
    writer, sibling = Checkpoint(tmp_path), Checkpoint(tmp_path)
    before = sibling.stamp()
    writer.mark_changing()
    first = sibling.stamp()
    assert first != before
    (tmp_path / "claims.generation").unlink()  # e.g. an operator cleaning up
    writer.mark_changing()
    assert sibling.stamp() not in (first, before)
    assert (tmp_path / "claims.generation").stat().st_size == 64


def test_round_trip_keeps_everything_exactly(tmp_path):
    store = Checkpoint(tmp_path)
    prepared = _prepared(A)
    store.save(prepared)
    records, problems = Checkpoint(tmp_path).load_all()
    assert problems == []
    assert records == {A: prepared}
    assert records[A].spec_bytes() == prepared.spec_bytes()
    raw = json.loads((tmp_path / "claims" / f"{A}.json").read_text())
    assert (raw["version"], raw["compatVersion"]) == (3, 2)
    assert raw["checksum"].startswith("sha256:")
    assert raw["payload"]["claim"] == {"namespace": "default", "name": "claim-aaaaaaaa", "uid": A}
    assert raw["payload"]["cdiFile"] == prepared.cdi_file
    assert raw["payload"]["cdiSpec"]["kind"] == f"k8s.{DRIVER}/device"


def test_a_record_file_is_the_canonical_json_of_the_record(tmp_path):
    """Sorted keys, no spaces, one line: what `json.dumps` of the record would write,
    even though the payload's text is spliced in (its checksum needs that text)."""
    Checkpoint(tmp_path).save(_prepared(A))
    data = (tmp_path / "claims" / f"{A}.json").read_text()
    record = json.loads(data)
    assert sorted(record) == ["checksum", "compatVersion", "kind", "payload", "version"]
    assert data == json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    assert record["checksum"] == record_checksum(record)


def _corrupt_json(path):
    path.write_text(path.read_text()[:-40])


def _tamper(path):
    record = json.loads(path.read_text())
    record["payload"]["units"][1]["consumedCapacity"]["bandwidth"] = "1"
    path.write_text(json.dumps(record))


def _edited_version(path):
    """The checksum covers the version fields: an edited one is not trusted."""
    record = json.loads(path.read_text())
    record["compatVersion"] = record["version"] = 99
    path.write_text(json.dumps(record))


def _other_kind(path):
    record = json.loads(path.read_text())
    record["kind"] = "other.Record"
    record["checksum"] = record_checksum(record)
    path.write_text(json.dumps(record))


def _wrong_name(path):
    path.rename(path.with_name(f"{B}.json"))
    return path.with_name(f"{B}.json")


@pytest.mark.parametrize(
    ("damage", "reason", "uid"),
    [
        (_corrupt_json, "not valid JSON", A),
        (_tamper, "checksum mismatch", A),
        (_edited_version, "checksum mismatch", A),
        (_other_kind, "format 'other.Record' version 3", A),
        (_wrong_name, f"holds claim uid '{A}' but is named for uid '{B}'", B),
    ],
)
def test_corrupt_records_are_reported_with_path_and_reason_and_kept(tmp_path, damage, reason, uid):
    store = Checkpoint(tmp_path)
    store.save(_prepared(A))
    good = _prepared("cccccccc-0000-4000-8000-000000000003")
    store.save(good)
    path = store.path_for(A)
    path = damage(path) or path
    before = path.read_bytes()
    records, problems = store.load_all()
    assert records == {good.claim.uid: good}  # one bad record costs one claim only
    (problem,) = problems
    assert problem.uid == uid and problem.path == path
    assert reason in problem.reason
    assert str(path) in str(problem)
    assert path.read_bytes() == before  # never silently deleted or rewritten


def test_quarantine_moves_aside_without_overwriting_earlier_ones(tmp_path):
    store = Checkpoint(tmp_path)
    for expected in (f"{A}.json.corrupt", f"{A}.json.corrupt.1"):
        store.path_for(A).write_text("{broken")
        moved = store.quarantine(A)
        assert moved is not None and moved.name == expected
        assert moved.read_text() == "{broken"
    assert store.quarantine(A) is None
    assert store.load_all() == ({}, [])


def test_temp_files_of_interrupted_writes_are_removed_and_never_loaded(tmp_path):
    store = Checkpoint(tmp_path)
    stale = store.directory / f".{A}.json.x1y2.tmp"
    stale.write_text("{half")
    assert store.load_all() == ({}, [])
    assert store.remove_temp_files() == [stale]
    assert not stale.exists()


@pytest.mark.parametrize("uid", ["../../etc/passwd", "../x", "a/b", ".."])
def test_hostile_uid_never_names_a_path(tmp_path, uid):
    with pytest.raises(ValueError, match="unsafe file name"):
        Checkpoint(tmp_path).path_for(uid)


def test_round_trip_keeps_counters_attributes_and_config(tmp_path):
    cluster = ProfileCluster("gpu-partitioned,nic")
    ref = cluster.allocate(
        "mixed",
        with_profile("gpu", "2g.20gb"),
        wants("net", "nic", bandwidth="1G"),
        config=[config_entry(nic_config(mtu=9000, rateLimit="500M"))],
    )
    raw = cluster.allocated[ref.uid]
    prepared = plan_prepare(parse_claim(raw, DRIVER), cluster.inventory, DRIVER, rules=RULES)
    Checkpoint(tmp_path).save(prepared)
    records, problems = Checkpoint(tmp_path).load_all()
    assert problems == [] and records == {ref.uid: prepared}
    partition, share = records[ref.uid].units
    assert partition.consumes_counters == {"gpu-0-counters": {"memory": 20 * 2**30, "slices": 2}}
    assert partition.attribute("profile") == "2g.20gb"
    assert share.config["rateLimit"] == "500M"


def test_records_of_the_first_format_still_load(tmp_path):
    """Records written before units carried type, attributes, counters and config."""
    prepared = _prepared(A)
    payload = to_payload(prepared)
    for unit in payload["units"]:
        for key in ("deviceType", "attributes", "consumesCounters", "counterTotals", "config"):
            del unit[key]
    old = {"kind": RECORD_KIND, "version": 1, "payload": payload}
    old["checksum"] = record_checksum(old)
    store = Checkpoint(tmp_path)
    store.path_for(A).write_text(json.dumps(old))
    records, problems = store.load_all()
    assert problems == []
    (gpu, nic) = records[A].units
    assert (gpu.device_type, gpu.consumes_counters, nic.config) == ("device", {}, {})
    assert nic.consumed_capacity == prepared.units[1].consumed_capacity
